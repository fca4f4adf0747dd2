"""One side of the benchmark in one process: ``python -m pail_bench.driver``.

The same file runs in two interpreters. In the project's venv ``import pail``
is this project's runtime; in ``.bench-venv`` it is the original pailq 0.1.1,
installed unmodified (the two share the import name, so they cannot share a
process). A scenario spec comes in as JSON on stdin and one JSON object goes
out on stdout, so both queues are driven by the same code, with the same
process structure and the same request counting.

Both are driven only through the API they share: ``Pail.connect``,
``enqueue``, ``claim`` / ``complete``, ``work_once`` and ``work``. The hooks
are attached where each builds its boto3 client: the original's ``connect``
calls ``boto3.client(...)``, which uses boto3's default session, so the
counter is registered on a fresh default session just before each connect
(clients copy the session's handlers when they are created); ours builds
its client with ``pail.queue.build_client``, so the driver builds it the
same way, registers the counter on it and passes it to ``connect``.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Queue
from typing import Any

from pail_bench.counting import RequestCounter, diff, failed_conditions, total
from pail_bench.per_job import per_job
from pail_bench.sides import (
    IDLE_WAIT,
    SEED_THREADS,
    Executions,
    Params,
    Result,
    Side,
    add,
    per,
    quantile,
    seed,
)
from pail_bench.steady import steady

# -- scenarios -----------------------------------------------------------------


class _Backlog:
    """One queue held at a fixed backlog, with one long-lived worker, and what its claims cost."""

    def __init__(self, side: Side, bucket: str, backlog: int, wanted: int) -> None:
        seed(side, bucket, 0, backlog)
        self.side = side
        self.queue = side.queue(bucket)
        if side.name == "pail":
            # pail's claims reclaim expired leases once per visibility timeout, the first claim
            # included; that pass is a worker's cost per interval (docs/upgrading.md measures it),
            # so it runs here, untimed, rather than as one of a few measured claims' LISTs.
            self.queue.reclaim()
        self.backlog = backlog
        self.wanted = wanted
        self.next_job = backlog
        self.times: list[float] = []
        self.spent = 0.0
        self.claim_counts: dict[str, int] = {}
        self.complete_counts: dict[str, int] = {}
        self.enqueue_counts: dict[str, int] = {}

    def active(self, min_claims: int, cap_seconds: float) -> bool:
        n = len(self.times)
        return n < self.wanted and (n < min_claims or self.spent < cap_seconds)

    def step(self) -> None:
        """Claim one job (timed and counted alone), complete it, enqueue a replacement."""
        counter = self.side.counter
        before = counter.snapshot()
        started = time.perf_counter()
        message = self.queue.claim()
        claimed_at = time.perf_counter()
        claimed = counter.snapshot()
        if message is None:
            raise RuntimeError(f"{self.side.name}: no job claimed at backlog {self.backlog}")
        message.complete({"ok": True})
        flush = getattr(self.queue, "flush", None)
        if flush is not None:
            flush()  # pail removes the lease in the background: count it with the complete
        completed = counter.snapshot()
        self.queue.enqueue({"job": self.next_job})
        self.next_job += 1
        self.times.append(claimed_at - started)
        self.spent += time.perf_counter() - started
        add(self.claim_counts, diff(claimed, before))
        add(self.complete_counts, diff(completed, claimed))
        add(self.enqueue_counts, diff(counter.snapshot(), completed))

    def to_json(self) -> Result:
        n = len(self.times)
        job_counts = _summed(self.claim_counts, self.complete_counts, self.enqueue_counts)
        return {
            "backlog": self.backlog,
            "claims": n,
            "claim_ms_median": round(statistics.median(self.times) * 1000, 2),
            "claim_ms_p90": round(quantile(self.times, 0.9) * 1000, 2),
            "claim_requests": self.claim_counts,
            "complete_requests": self.complete_counts,
            "enqueue_requests": self.enqueue_counts,
            "job_counts": job_counts,
            "claim_per": per(self.claim_counts, n),
            "job_per": per(job_counts, n),
            "failed_conditions": failed_conditions(job_counts),
        }


def claim_path(side: Side, bucket: str, p: Params) -> Result:
    """Claim cost at several backlogs, with one worker per queue and short jobs.

    Each backlog has a bucket of its own (``{bucket}-{i}``) filled up front
    and its own long-lived worker. Claims then go round-robin over the
    backlogs, one at a time, so a change in the machine's load hits every
    backlog alike. Each claim is timed and counted on its own; the job is
    then completed and a replacement enqueued (both counted apart), so the
    backlog stays where it is while it is measured.
    """
    backlogs = [
        _Backlog(side, f"{bucket}-{i}", backlog, wanted)
        for i, (backlog, wanted) in enumerate(zip(p["backlogs"], p["claims"], strict=True))
    ]
    while True:
        active = [b for b in backlogs if b.active(p["min_claims"], p["cap_seconds"])]
        if not active:
            break
        for backlog in active:
            backlog.step()
    return {"steps": [b.to_json() for b in backlogs]}


def _summed(*counts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        add(out, c)
    return out


def contention(side: Side, bucket: str, p: Params) -> Result:
    """``workers`` threads, each with its own client, race through ``jobs`` pre-enqueued jobs.

    Every worker loops on ``work_once`` (waiting ``IDLE_WAIT`` after an
    empty answer) until all jobs ran or ``cap_seconds`` passed; a job in
    flight at the cap is finished before its worker stops.
    """
    jobs, workers = p["jobs"], p["workers"]
    before_seed = side.counter.snapshot()
    seed(side, bucket, 0, jobs)
    seeded = side.counter.snapshot()
    queues = [side.queue(bucket) for _ in range(workers)]
    runs = Executions()
    stop = threading.Event()
    lock = threading.Lock()
    finished: list[float] = []
    errors: list[str] = []

    def loop(q: Any) -> None:
        while not stop.is_set():
            try:
                found = q.work_once(runs.handler)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the loop goes on
                with lock:
                    errors.append(repr(exc)[:300])
                found = False
            if found:
                with lock:
                    finished.append(time.perf_counter())
                    if len(finished) >= jobs:
                        stop.set()
            else:
                stop.wait(IDLE_WAIT)
        wait = getattr(q, "flush", None)
        if wait is not None:
            wait()  # pail's last lease removal is in flight after work_once: count it too

    started = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(q,), daemon=True) for q in queues]
    for t in threads:
        t.start()
    stop.wait(p["cap_seconds"])
    capped = not stop.is_set()
    stop.set()
    for t in threads:
        t.join(timeout=120)
    counts = diff(side.counter.snapshot(), seeded)
    claims = len(finished)
    elapsed = (max(finished) - started) if finished else 0.0
    return {
        "workers": workers,
        "jobs": jobs,
        "claims": claims,
        "executions": sum(runs.runs.values()),
        "unique_executed": runs.unique(),
        "duplicates": runs.duplicates(),
        "capped": capped,
        "seconds": round(elapsed, 3),
        "jobs_per_second": round(claims / elapsed, 2) if elapsed else 0.0,
        "requests": counts,
        "enqueue_requests": diff(seeded, before_seed),
        "requests_per_job": round(total(counts) / claims, 3) if claims else None,
        "failed_conditions": failed_conditions(counts),
        "failed_conditions_per_claim": round(failed_conditions(counts) / claims, 4)
        if claims
        else None,
        "per_job": per(counts, claims),
        "errors": len(errors),
        "error_samples": errors[:3],
    }


def latency(side: Side, bucket: str, p: Params) -> Result:
    """Enqueue to claim for one idle, warm worker running the queue's own ``work`` loop.

    Before each job the producer waits long enough for the worker's polling
    to back off to its ceiling, plus a random part of one poll interval, so
    jobs arrive at a random phase of an idle worker's polling.
    Latency runs from ``enqueue`` returning to the handler starting. With
    ``endpoint_url`` both talk to the server through that front. It is
    split in two: the ``claim()`` call that returned the job (timed by
    wrapping the worker's bound ``claim``, which both ``work`` loops call),
    and the wait before that call began.
    """
    floor, ceiling = p["floor"], p["ceiling"]
    endpoint = p.get("endpoint_url")
    worker_q = side.queue(bucket, endpoint_url=endpoint)
    producer = side.queue(bucket, endpoint_url=endpoint)
    arrived: Queue[float] = Queue()
    claim_seconds: Queue[float] = Queue()
    stop = threading.Event()

    def timed(claim: Any) -> Any:
        def timed_claim() -> Any:
            started = time.perf_counter()
            message = claim()
            if message is not None:
                claim_seconds.put(time.perf_counter() - started)
            return message

        return timed_claim

    # Our work loop polls (Pail.poll); the original's, and older ones, claim.
    for name in ("claim", "poll"):
        if hasattr(worker_q, name):
            setattr(worker_q, name, timed(getattr(worker_q, name)))

    def handler(payload: Any) -> dict[str, Any]:
        arrived.put(time.perf_counter())
        return {"ok": True}

    def run() -> None:
        if side.original:
            worker_q.work(handler, poll_interval=ceiling)  # loops forever: a daemon thread
        else:
            worker_q.work(handler, min_poll_interval=floor, poll_interval=ceiling, stop=stop)

    threading.Thread(target=run, daemon=True).start()
    rng = random.Random(7)
    samples: list[float] = []
    claims: list[float] = []
    for job in range(p["samples"] + 1):
        time.sleep(2 * ceiling + rng.uniform(0, ceiling))
        producer.enqueue({"job": job})
        enqueued = time.perf_counter()
        try:
            started = arrived.get(timeout=2 * ceiling + 30)
        except Empty:
            raise RuntimeError(f"{side.name}: job {job} was not claimed") from None
        took = claim_seconds.get(timeout=5)
        if job:  # the first one warms the connections up
            samples.append(started - enqueued)
            claims.append(took)
    stop.set()
    waits = [total - took for total, took in zip(samples, claims, strict=True)]
    return {
        "floor": floor,
        "ceiling": ceiling,
        "samples": len(samples),
        "p50_ms": round(quantile(samples, 0.5) * 1000, 1),
        "p99_ms": round(quantile(samples, 0.99) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "claim_p50_ms": round(quantile(claims, 0.5) * 1000, 1),
        "wait_p50_ms": round(quantile(waits, 0.5) * 1000, 1),
    }


def idle(side: Side, bucket: str, p: Params) -> Result:
    """Requests per minute of idle workers on empty queues, one per polling setting.

    Each setting runs the queue's own ``work`` loop in its own bucket (the
    orchestrator makes ``{bucket}-{i}``), all at once, for ``seconds``.
    """
    seconds = p["seconds"]
    stop = threading.Event()
    runs = []
    for index, setting in enumerate(p["settings"]):
        counter = RequestCounter()
        q = side.queue(f"{bucket}-{index}", counter=counter)
        runs.append((setting, counter, q))

    def never(payload: Any) -> None:
        raise RuntimeError("the queue was meant to stay empty")

    def run(setting: dict[str, float], q: Any) -> None:
        if side.original:
            q.work(never, poll_interval=setting["ceiling"])
        else:
            q.work(
                never,
                min_poll_interval=setting["floor"],
                poll_interval=setting["ceiling"],
                stop=stop,
            )

    for setting, _, q in runs:
        threading.Thread(target=run, args=(setting, q), daemon=True).start()
    time.sleep(seconds)
    stop.set()
    out = []
    for setting, counter, _ in runs:
        counts = counter.snapshot()
        out.append(
            {
                **setting,
                "seconds": seconds,
                "requests": counts,
                "per_minute": round(total(counts) * 60 / seconds, 1),
            }
        )
    return {"settings": out}


def ceiling(side: Side, bucket: str, p: Params) -> Result:
    """The server's own rate for PUT, GET, HEAD, LIST and DELETE with N client threads.

    Each thread has its own client and loops on one operation for
    ``seconds``. Bodies are the size of a job; LIST reads pages of 100 keys
    (the claimer's page size) from a prefix of 150.
    """
    seconds = p["seconds"]
    most = max(p["threads"])
    clients = [side.raw_client(most) for _ in range(most)]
    body = b'{"payload": {"job": 123456}, "attempts": 0, "v": 1, "w": "0123456789abcdef"}' * 2
    for i in range(150):
        clients[0].put_object(Bucket=bucket, Key=f"list/{i:06d}", Body=body)
    rates: dict[str, dict[str, float]] = {}
    for threads in p["threads"]:
        ops = _ServerOps(bucket, body, threads)
        rates[str(threads)] = {
            name: _rate(clients[:threads], op, seconds) for name, op in ops.by_name().items()
        }
    return {"threads": p["threads"], "seconds": seconds, "ops_per_second": rates}


class _ExhaustedError(Exception):
    """A DELETE thread ran out of keys to delete."""


class _ServerOps:
    """One request of each kind, as ``op(client, thread, i)``; DELETE removes what PUT made."""

    def __init__(self, bucket: str, body: bytes, threads: int) -> None:
        self._bucket = bucket
        self._body = body
        self._threads = threads
        self._written: list[list[str]] = [[] for _ in range(threads)]

    def by_name(self) -> dict[str, Callable[[Any, int, int], None]]:
        return {
            "PutObject": self.put,
            "GetObject": self.get,
            "HeadObject": self.head,
            "ListObjectsV2": self.list,
            "DeleteObject": self.delete,
        }

    def put(self, client: Any, t: int, i: int) -> None:
        key = f"put/{self._threads}/{t}/{i:07d}"
        client.put_object(Bucket=self._bucket, Key=key, Body=self._body)
        self._written[t].append(key)

    def get(self, client: Any, t: int, i: int) -> None:
        key = f"list/{(t * 7 + i) % 150:06d}"
        client.get_object(Bucket=self._bucket, Key=key)["Body"].read()

    def head(self, client: Any, t: int, i: int) -> None:
        client.head_object(Bucket=self._bucket, Key=f"list/{(t * 7 + i) % 150:06d}")

    def list(self, client: Any, t: int, i: int) -> None:
        client.list_objects_v2(Bucket=self._bucket, Prefix="list/", MaxKeys=100)

    def delete(self, client: Any, t: int, i: int) -> None:
        keys = self._written[t]
        if i >= len(keys):
            raise _ExhaustedError
        client.delete_object(Bucket=self._bucket, Key=keys[i])


def _rate(clients: list[Any], op: Callable[[Any, int, int], None], seconds: float) -> float:
    go = threading.Barrier(len(clients) + 1)
    counts = [0] * len(clients)
    ends = [0.0] * len(clients)

    def run(t: int) -> None:
        go.wait()
        deadline = time.perf_counter() + seconds
        i = 0
        try:
            while time.perf_counter() < deadline:
                op(clients[t], t, i)
                i += 1
        except _ExhaustedError:
            pass
        counts[t], ends[t] = i, time.perf_counter()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(len(clients))]
    for t in threads:
        t.start()
    go.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return round(sum(counts) / (max(ends) - started), 1)


def list_scaling(side: Side, bucket: str, p: Params) -> Result:
    """LIST time with ``MaxKeys`` = ``max_keys`` as the bucket grows to each of ``sizes``."""
    client = side.raw_client(SEED_THREADS)
    have = 0
    out = []
    for size in p["sizes"]:
        keys = [f"queue/{i:08d}" for i in range(have, size)]

        def put(key: str) -> None:
            client.put_object(Bucket=bucket, Key=key, Body=b"{}")

        with ThreadPoolExecutor(SEED_THREADS) as pool:
            list(pool.map(put, keys))
        have = size
        client.list_objects_v2(Bucket=bucket, Prefix="queue/", MaxKeys=p["max_keys"])
        times = []
        for _ in range(p["repeats"]):
            started = time.perf_counter()
            client.list_objects_v2(Bucket=bucket, Prefix="queue/", MaxKeys=p["max_keys"])
            times.append(time.perf_counter() - started)
        out.append(
            {
                "objects": size,
                "median_ms": round(statistics.median(times) * 1000, 2),
                "p90_ms": round(quantile(times, 0.9) * 1000, 2),
            }
        )
    return {"max_keys": p["max_keys"], "sizes": out}


SCENARIOS: dict[str, Callable[[Side, str, Params], Result]] = {
    "claim_path": claim_path,
    "contention": contention,
    "latency": latency,
    "idle": idle,
    "ceiling": ceiling,
    "list_scaling": list_scaling,
    "per_job": per_job,
    "steady": steady,
}


def main() -> None:
    spec = json.load(sys.stdin)
    side = Side(spec["connect"])
    started = time.perf_counter()
    result = SCENARIOS[spec["scenario"]](side, spec["bucket"], spec["params"])
    result.update(
        bucket=spec["bucket"],
        side=side.name,
        version=side.version,
        module=side.pail.__file__,
        wall_seconds=round(time.perf_counter() - started, 2),
    )
    json.dump(result, sys.stdout)
    sys.stdout.flush()
    sys.stderr.flush()
    # The original's ``work`` loops forever in daemon threads; leave without
    # waiting for interpreter shutdown to tear them down mid-request.
    os._exit(0)


if __name__ == "__main__":
    main()
