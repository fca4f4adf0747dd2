"""Steady throughput through a front: workers drain while a producer keeps a backlog waiting.

This is the partition model's measurement (``docs/scaling.md``): every
request goes through the front, enqueues included, so a job costs the
partition what it costs on S3: the enqueue's PUT plus the worker's claim
and completion. The producer tops the queue up to ``backlog`` pending jobs
whenever it falls below, so the queue never runs dry and never grows.

After a warm-up, jobs/s is counted over a fixed window, with the requests
the window saw. At the end the bucket is listed straight from the server
(not through the front) to account for every job enqueued: where its keys
are, and whether any is missing.

Our side only (``connect`` options are passed to ``Pail.connect``, so a
later layout, a shard count for example, is measured by the same code).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

from pail_bench.counting import RequestCounter, diff
from pail_bench.sides import IDLE_WAIT, Executions, Params, Result, Side

PRODUCER_SHARE = 4
"""One producer thread per this many workers: one thread alone, sharing a process with 16
busy workers, cannot enqueue as fast as they drain."""
MAX_BACKOFF = 1.0
"""The longest a benchmark loop waits after an error, doubling from ``IDLE_WAIT``."""


class _Loops:
    """The producer's and the workers' loops, and what they saw."""

    def __init__(self, backlog: int, first_ids: list[str]) -> None:
        self.backlog = backlog
        self.stop = threading.Event()
        self.runs = Executions()
        self.lock = threading.Lock()
        self.ids = list(first_ids)
        self.numbers = itertools.count(len(first_ids))
        self.enqueuing = 0
        self.finished: list[float] = []
        self.errors: Counter[str] = Counter()
        self.samples: list[str] = []

    def error(self, where: str, exc: Exception) -> float:
        with self.lock:
            self.errors[f"{where}: {type(exc).__name__}"] += 1
            if len(self.samples) < 5:
                self.samples.append(f"{where}: {exc!r}"[:300])
        return IDLE_WAIT

    def _next_job(self) -> int | None:
        """A new job's number if the backlog is short (counting enqueues in flight), else None."""
        with self.lock:
            if len(self.ids) + self.enqueuing - len(self.finished) >= self.backlog:
                return None
            self.enqueuing += 1
            return next(self.numbers)

    def produce(self, queue: Any) -> None:
        wait = 0.0
        while not self.stop.is_set():
            number = self._next_job()
            if number is None:
                self.stop.wait(0.01)
                continue
            try:
                job_id = queue.enqueue({"job": number})
            except Exception as exc:  # noqa: BLE001 - counted and reported; the loop goes on
                with self.lock:
                    self.enqueuing -= 1
                wait = min(MAX_BACKOFF, max(self.error("enqueue", exc), wait * 2))
                self.stop.wait(wait)
                continue
            wait = 0.0
            with self.lock:
                self.enqueuing -= 1
                self.ids.append(str(job_id))

    def work(self, queue: Any) -> None:
        wait = 0.0
        while not self.stop.is_set():
            try:
                found = queue.work_once(self.runs.handler)
            except Exception as exc:  # noqa: BLE001 - counted and reported; the loop goes on
                wait = min(MAX_BACKOFF, max(self.error("work_once", exc), wait * 2))
                self.stop.wait(wait)
                continue
            wait = 0.0
            if found:
                with self.lock:
                    self.finished.append(time.perf_counter())
            else:
                self.stop.wait(IDLE_WAIT)


def steady(side: Side, bucket: str, p: Params) -> Result:
    """``workers`` ``work_once`` loops and one producer, all through the front at ``endpoint_url``."""
    workers, backlog = int(p["workers"]), int(p["backlog"])
    warmup, window = float(p["warmup_seconds"]), float(p["window_seconds"])
    options: dict[str, Any] = p.get("connect") or {}
    direct = side.queue(bucket, counter=RequestCounter(), options=options)
    loops = _Loops(backlog, [str(direct.enqueue({"job": i})) for i in range(backlog)])
    front = p["endpoint_url"]
    counter = side.counter
    producers = [
        side.queue(bucket, endpoint_url=front, options=options)
        for _ in range(max(1, workers // PRODUCER_SHARE))
    ]
    queues = [side.queue(bucket, endpoint_url=front, options=options) for _ in range(workers)]
    threads = [threading.Thread(target=loops.produce, args=(q,), daemon=True) for q in producers]
    threads += [threading.Thread(target=loops.work, args=(q,), daemon=True) for q in queues]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    loops.stop.wait(warmup)
    window_start, before, done_before = time.perf_counter(), counter.snapshot(), len(loops.finished)
    loops.stop.wait(window)
    window_end, after, done_after = time.perf_counter(), counter.snapshot(), len(loops.finished)
    loops.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    ended = time.perf_counter()
    jobs = done_after - done_before
    seconds = window_end - window_start
    with loops.lock:
        ids, finished = list(loops.ids), list(loops.finished)
    return {
        "workers": workers,
        "backlog": backlog,
        "connect": options,
        "warmup_seconds": warmup,
        "window_seconds": round(seconds, 3),
        "window_jobs": jobs,
        "jobs_per_second": round(jobs / seconds, 3) if seconds else 0.0,
        "window_requests": diff(after, before),
        "requests": counter.snapshot(),
        "run_seconds": round(ended - started, 3),
        "completed": len(finished),
        "timeline": _per_second(finished, started),
        "enqueued": len(ids),
        "executions": sum(loops.runs.runs.values()),
        "unique_executed": loops.runs.unique(),
        "duplicates": loops.runs.duplicates(),
        "errors": dict(loops.errors),
        "error_samples": loops.samples,
        "audit": _audit(side, bucket, ids),
    }


def _per_second(finished: list[float], started: float) -> list[int]:
    """Jobs completed in each second since the start."""
    if not finished:
        return []
    bins = [0] * (int(max(finished) - started) + 1)
    for at in finished:
        bins[int(at - started)] += 1
    return bins


def _audit(side: Side, bucket: str, ids: list[str]) -> dict[str, Any]:
    """Where every enqueued job's keys are now, listed from the server itself.

    A key's job id is its last ``/`` segment and its place is everything
    before that (``queue/``, ``run/``, ``done/`` today, whatever prefixes a
    later layout uses). ``missing`` are ids with no key at all: lost jobs.
    """
    client = side.raw_client(1)
    places: dict[str, set[str]] = {}
    token: dict[str, str] = {}
    while True:
        page = client.list_objects_v2(Bucket=bucket, **token)
        for item in page.get("Contents", []):
            place, _, job_id = str(item["Key"]).rpartition("/")
            places.setdefault(job_id, set()).add(place + "/")
        if not page.get("IsTruncated"):
            break
        token = {"ContinuationToken": page["NextContinuationToken"]}
    where: Counter[str] = Counter()
    missing = []
    for job_id in ids:
        found = places.get(job_id)
        if found is None:
            missing.append(job_id)
        else:
            where[" + ".join(sorted(found))] += 1
    held = sum(n for place, n in where.items() if "run/" in place and "done/" not in place)
    return {
        "jobs": len(ids),
        "by_place": dict(where),
        "missing": missing[:20],
        "lost": len(missing),
        "awaiting_reaper": held,
    }
