"""OpenTelemetry: a producer process's span reaches the handler in a ``pail work`` process.

Both processes run the SDK with its in-memory exporter
(``tests/features/tracing_processes.py``) and print their spans; the test
joins them by trace id. Without a tracer provider nothing is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pail import Pail
from pail.local import LocalS3
from tests.support.command import process_env

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("opentelemetry.sdk")


def _run(role: str, args: dict[str, Any], env: dict[str, str], key: str) -> tuple[Any, list[Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.features.tracing_processes", role, json.dumps(args)],
        cwd=ROOT,
        env=process_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    # pail work prints its own JSON lines (EMF metrics) too: take the one the script printed.
    (result,) = [line[key] for line in lines if key in line]
    return result, [line["span"] for line in lines if "span" in line]


def test_given_a_traced_producer_when_pail_work_runs_the_jobs_then_one_trace_from_request_to_handler(
    s3_server: LocalS3, bucket: str
) -> None:
    connect = s3_server.connect_kwargs()
    produced, producer_spans = _run(
        "produce",
        {"bucket": bucket, "connect": connect, "payloads": [{"n": 1, "fail": True}, {"n": 2}]},
        s3_server.env(),
        "ids",
    )
    failing, fine = produced
    argv = ["work", bucket, "--handler", "tests.features.tracing_processes:handle"]
    argv += ["--max-jobs", "2", "--max-retries", "0"]
    exit_code, worker_spans = _run("work", {"argv": argv}, s3_server.env(), "exit_code")

    assert exit_code == 0
    (request,) = [s for s in producer_spans if s["name"] == "request"]
    sends = [s for s in producer_spans if s["kind"] == "PRODUCER"]
    assert len(sends) == 2 and all(s["parent_id"] == request["span_id"] for s in sends)
    destination = f"{bucket}/(default)"
    send_of = {s["attributes"]["messaging.message.id"]: s for s in sends}
    assert sends[0]["name"] == f"send {destination}"
    assert sends[0]["attributes"]["messaging.system"] == "pail"
    assert sends[0]["attributes"]["messaging.destination.name"] == destination

    trace_id = request["trace_id"]
    assert {s["trace_id"] for s in worker_spans} == {trace_id}  # one trace across the processes
    process = {
        s["attributes"]["messaging.message.id"]: s for s in worker_spans if s["kind"] == "CONSUMER"
    }
    for job_id in (failing, fine):
        span = process[job_id]
        assert span["name"] == f"process {destination}"
        assert span["parent_id"] == send_of[job_id]["span_id"]  # child of the producer's span
        assert span["links"] == [{"trace_id": trace_id, "span_id": send_of[job_id]["span_id"]}]
        assert span["attributes"]["pail.attempt"] == 1
        assert span["attributes"]["messaging.operation.type"] == "process"
    assert process[fine]["attributes"]["pail.outcome"] == "succeeded"
    assert process[fine]["status"] == "UNSET"
    assert process[failing]["attributes"]["pail.outcome"] == "failed"
    assert process[failing]["status"] == "ERROR" and process[failing]["events"] == ["exception"]

    by_parent: dict[str | None, list[Any]] = {}
    for span in worker_spans:
        by_parent.setdefault(span["parent_id"], []).append(span)
    for job_id, operation in ((failing, "fail"), (fine, "complete")):
        children = {s["name"]: s for s in by_parent[process[job_id]["span_id"]]}
        assert set(children) == {"handler work", f"settle {destination}"}
        settle = children[f"settle {destination}"]
        assert settle["attributes"]["messaging.operation.name"] == operation
    receives = [s for s in worker_spans if s["name"] == f"receive {destination}"]
    assert sorted(s["attributes"]["messaging.message.id"] for s in receives) == sorted(
        [failing, fine]
    )
    for span in receives:  # made once the job is known: in the producer's trace, linked too
        assert span["parent_id"] == send_of[span["attributes"]["messaging.message.id"]]["span_id"]
    # A claim that found nothing (the drain's last) makes no span, nor does any heartbeat.
    assert len(worker_spans) == 2 * 4


def test_given_a_traced_producer_when_the_worker_lambda_runs_the_job_then_its_span_links_the_producer(
    s3_server: LocalS3, bucket: str
) -> None:
    connect = s3_server.connect_kwargs()
    (job_id,), producer_spans = _run(
        "produce",
        {"bucket": bucket, "connect": connect, "payloads": [{"n": 1}]},
        s3_server.env(),
        "ids",
    )
    processed, worker_spans = _run(
        "lambda", {"bucket": bucket, "connect": connect}, s3_server.env(), "lambda_processed"
    )

    assert processed == 1
    (send,) = [s for s in producer_spans if s["kind"] == "PRODUCER"]
    (invocation,) = [s for s in worker_spans if s["name"] == "invocation"]
    (process,) = [s for s in worker_spans if s["kind"] == "CONSUMER"]
    # The invocation's span is the parent (its trace is the function's); the producer's is a link.
    assert process["parent_id"] == invocation["span_id"]
    assert process["trace_id"] == invocation["trace_id"] != send["trace_id"]
    assert process["links"] == [{"trace_id": send["trace_id"], "span_id": send["span_id"]}]
    assert process["attributes"]["messaging.message.id"] == job_id
    assert process["attributes"]["pail.outcome"] == "succeeded"


def test_given_no_tracer_provider_when_enqueued_then_no_trace_field(
    connect: Callable[..., Pail],
) -> None:
    pail = connect()
    job_id = pail.enqueue({"n": 1})

    (entry,) = pail.store.list("queue/").items
    body = json.loads(pail.store.get(entry.key).body)  # type: ignore[union-attr]
    assert "trace" not in body
    assert pail.work_once(lambda payload: {"ok": True})
    assert pail.result(job_id) == {"ok": True}


def test_given_a_foreign_trace_field_when_claimed_then_dropped_and_the_job_runs(
    pail: Pail,
) -> None:
    pail.store.put(
        "queue/01J0000000000000000000000A",
        b'{"payload": {"n": 1}, "attempts": 0, "trace": {"traceparent": "<script>", "x": 1}}',
    )
    assert pail.work_once(lambda payload: {"ran": payload})
    assert pail.result("01J0000000000000000000000A") == {"ran": {"n": 1}}
