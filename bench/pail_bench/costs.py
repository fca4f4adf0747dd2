"""What a million jobs cost on AWS, from the requests the bench counted (docs/scaling.md).

Prices are us-east-1 list prices as found on 2026-11-30 with the ``search``
tool's stored copies of AWS pages (the S3 FAQ's S3 Express One Zone pricing
example, the Lambda, EventBridge, Fargate, SQS and DynamoDB pricing pages and
guides quoting them); no free tier is counted. The S3 Standard prices are
those of ``counting`` (MISSION.md). Everything not measured is an assumption
named here, so a reader can redo the arithmetic with their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pail_bench.counting import by_operation

BURST = Path(__file__).resolve().parents[1] / "lambda_burst.json"
"""The deploy rehearsal's burst (``tests/infra/test_rehearsal.py``: 100 enqueues, each event
invoking the synthesised worker under awslambdaric, 10 at a time, through the IAM proxy): the
worker role's requests by operation, copied from its report (``worker_burst``)."""

MILLION = 1_000_000
WRITE_CLASS = frozenset({"PutObject", "CopyObject", "PostObject", "ListObjectsV2", "ListObjects"})
READ_CLASS = frozenset({"GetObject", "HeadObject"})
CREATES = frozenset({"PutObject", "CopyObject", "PostObject"})


@dataclass(frozen=True)
class S3Prices:
    """Dollars per request by class (DELETE is free on both) and per GB moved."""

    name: str
    write: float
    read: float
    upload_gb: float = 0.0
    retrieve_gb: float = 0.0
    request_ms: float = 20.0
    """Assumed latency of one small request from a worker in the same region."""


STANDARD = S3Prices("S3 Standard", write=0.005 / 1000, read=0.0004 / 1000, request_ms=20.0)
EXPRESS = S3Prices(
    "S3 Express One Zone",
    write=0.00113 / 1000,  # PUT, COPY, POST; LIST assumed in the same class, as on Standard
    read=0.00003 / 1000,
    upload_gb=0.0032,
    retrieve_gb=0.0006,
    request_ms=5.0,  # "single-digit millisecond" first-byte latency
)

LAMBDA_REQUEST = 0.20 / MILLION
LAMBDA_GB_SECOND_ARM = 0.0000133334
LAMBDA_MEMORY_GB = 0.5
"""``PailWorkerFunction``'s default: 512 MiB on arm64."""
HANDLER_SECONDS = 0.1
"""The reference job: 100 ms of the user's own work, the same on every stack."""
EVENTBRIDGE_EVENT = 1.00 / MILLION
"""S3's Object Created/Deleted events are "AWS opt-in data events" on the EventBridge
pricing page; priced here as custom events, the worst case (guides list S3 events as free)."""
SQS_REQUEST = 0.40 / MILLION
DYNAMODB_WRITE = 0.625 / MILLION
DYNAMODB_READ = 0.125 / MILLION
DYNAMODB_WRITE_SECONDS = 0.008
"""Assumed latency of a DynamoDB status write; the worker makes two in a job's path."""
HTTP_API_REQUEST = 1.00 / MILLION
FARGATE_VCPU_HOUR = 0.04048
FARGATE_GB_HOUR = 0.004445
FARGATE_TASK = (0.25, 0.5)
"""``PailFargateWorker``'s default task: 0.25 vCPU, 0.5 GB, x86."""
JOB_BYTES_WRITTEN = 600
"""Envelope, lease and result of a small job, in bytes (for Express's per-GB charges)."""
JOB_BYTES_READ = 200


def per_job_mix(results: dict[str, Any]) -> dict[str, float]:
    """Requests per job by operation: enqueue, claim and complete, one worker (claim-cost scenario)."""
    backlog = results["meta"]["plan"]["cost_backlog"]
    step = next(s for s in results["claim_path"]["pail"]["steps"] if s["backlog"] == backlog)
    return {op: n / step["claims"] for op, n in by_operation(step["job_counts"]).items()}


def burst() -> dict[str, Any] | None:
    """The measured burst of ``BURST``, if it was recorded."""
    if not BURST.is_file():
        return None
    data: dict[str, Any] = json.loads(BURST.read_text())
    return data


def wake_up_mix(mix: dict[str, float], measured: dict[str, Any] | None) -> dict[str, float]:
    """Requests per job the deployed shape adds to one worker's ``mix``: event wake-ups whose
    job another invocation ran, claims lost to racing drains, their listings (the burst's
    per-job mix, its enqueue PUT added, less ``mix``)."""
    if measured is None:
        return {"ListObjectsV2": 1.0}  # not measured: one LIST per drained wake-up, as before
    jobs = measured["jobs_run"]
    per_job = {op: n / jobs for op, n in measured["by_operation"].items()}
    per_job["PutObject"] = per_job.get("PutObject", 0.0) + 1  # the producer's enqueue
    return {op: max(0.0, n - mix.get(op, 0.0)) for op, n in per_job.items()}


def round_trips(results: dict[str, Any], delay_ms: float = 20.0) -> float | None:
    """pail's sequential round trips per job at ``delay_ms``, if the per-job section ran."""
    if "per_job" not in results:
        return None
    from pail_bench.report_latency import round_trips as measured

    return measured(results["per_job"], "pail").get(delay_ms)


def _requests(mix: dict[str, float], prices: S3Prices, *, moved: bool = True) -> float:
    write = sum(n for op, n in mix.items() if op in WRITE_CLASS)
    read = sum(n for op, n in mix.items() if op in READ_CLASS)
    data = (JOB_BYTES_WRITTEN * prices.upload_gb + JOB_BYTES_READ * prices.retrieve_gb) / 1e9
    return write * prices.write + read * prices.read + (data if moved else 0.0)


def table(results: dict[str, Any]) -> list[tuple[str, list[float | None]]]:
    """Rows of (what, [S3 Standard, S3 Express One Zone, SQS + DynamoDB]) in $ per million jobs."""
    mix = per_job_mix(results)
    trips = round_trips(results) or 6.0
    events = sum(n for op, n in mix.items() if op in CREATES | {"DeleteObject"})
    rows: list[tuple[str, list[float | None]]] = []
    rows.append(
        (
            "queue requests (S3: measured mix; SQS: send, receive, delete)",
            [_requests(mix, STANDARD), _requests(mix, EXPRESS), 3 * SQS_REQUEST],
        )
    )
    rows.append(
        ("job status records (DynamoDB: pending, running, done)", [0.0, 0.0, 3 * DYNAMODB_WRITE])
    )
    rows.append(("Lambda invocations (one per enqueue event)", [LAMBDA_REQUEST] * 3))
    measured = burst()
    extra = wake_up_mix(mix, measured)
    rows.append(
        (
            "Lambda wake-ups and racing drains (measured: the burst's mix beyond one worker's)"
            if measured is not None
            else "Lambda wake-ups that find the queue drained: one LIST each",
            [_requests(extra, STANDARD, moved=False), None, None],
        )
    )
    overhead = [trips * p.request_ms / 1000 for p in (STANDARD, EXPRESS)]
    overhead.append(2 * DYNAMODB_WRITE_SECONDS)
    rows.append(
        (
            "Lambda GB-seconds: the 100 ms handler + the queue's own round trips",
            [LAMBDA_MEMORY_GB * (HANDLER_SECONDS + o) * LAMBDA_GB_SECOND_ARM for o in overhead],
        )
    )
    rows.append(
        (
            f"EventBridge: S3 events per job ({events:.0f}), if billed at $1.00 per million",
            [events * EVENTBRIDGE_EVENT, None, None],
        )
    )
    return [(name, [None if v is None else v * MILLION for v in values]) for name, values in rows]


def markdown(results: dict[str, Any]) -> str:
    """The cost table, with the figures it rests on."""
    mix = per_job_mix(results)
    trips = round_trips(results)
    rows = table(results)
    totals = [sum(v for _, values in rows if (v := values[i]) is not None) for i in range(3)]
    cells = [[name, *("—" if v is None else f"${v:.2f}" for v in values)] for name, values in rows]
    cells.append(["**total per million jobs**", *(f"**${t:.2f}**" for t in totals)])
    header = [
        "per million jobs",
        "pail, S3 Standard",
        "pail, S3 Express One Zone",
        "SQS + DynamoDB",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    listed = ", ".join(f"{op} {n:.3f}" for op, n in sorted(mix.items()))
    trip_text = f"{trips:.2f} measured at 20 ms" if trips is not None else "6 assumed"
    measured = burst()
    if measured is not None:
        extra = wake_up_mix(mix, measured)
        added = ", ".join(f"{op} {n:.2f}" for op, n in sorted(extra.items()) if n >= 0.005)
        burst_text = (
            f" The deployed shape, measured in the deploy rehearsal ({measured['source']}): "
            f"{measured['jobs_run']} jobs, {measured['invocations']} invocations "
            f"({measured['invocations_without_a_job']} found their job run already and "
            f"returned after its GET), {measured['requests']} worker requests; per job beyond "
            f"one worker's mix: {added}. An invocation whose job is gone makes one GET "
            f"(${STANDARD.read * MILLION:.2f} per million) where it used to LIST "
            f"(${STANDARD.write * MILLION:.2f}). A directory bucket sends no events: no "
            "wake-ups there."
        )
    else:
        burst_text = ""
    fargate_minute = (FARGATE_TASK[0] * FARGATE_VCPU_HOUR + FARGATE_TASK[1] * FARGATE_GB_HOUR) / 60
    return (
        f"Requests per job, measured (one worker, enqueue + claim + complete): {listed}. "
        f"Sequential round trips per job: {trip_text}; a request takes "
        f"{STANDARD.request_ms:g} ms on S3 Standard and {EXPRESS.request_ms:g} ms on Express, "
        f"a DynamoDB write {DYNAMODB_WRITE_SECONDS * 1000:g} ms (assumed).{burst_text}\n\n"
        + "\n".join(lines)
        + "\n\nNot per job: the reaper (one run a minute, 4 LISTs on an idle queue: "
        f"${43200 * 4 * STANDARD.write:.2f} a month on S3 Standard, plus 43,200 Lambda "
        "invocations). Fargate instead of Lambda: a `once` task per job bills at least a "
        f"minute, ${fargate_minute * MILLION:,.0f} per million jobs for the default 0.25 vCPU / "
        f"0.5 GB task; a `service` task costs ${fargate_minute * 60:.4f} an hour, "
        f"${fargate_minute * 60 / 3600 * MILLION:.2f} per million jobs at one job a second per "
        "task, whether or not jobs come. A browser polling a job's status pays per poll: a "
        f"presigned GET (${STANDARD.read * MILLION:.2f} per million on Standard, "
        f"${EXPRESS.read * MILLION:.2f} on Express) against an HTTP API request, a Lambda "
        "invocation and a DynamoDB read "
        f"(${(HTTP_API_REQUEST + LAMBDA_REQUEST + DYNAMODB_READ / 2) * MILLION:.2f} per "
        "million).\n"
    )
