"""Limits on the local S3 server, measured (docs/limits.md has the figures).

Three runs, each on its own queue of one server (127.0.0.1), every worker a
thread with its own client and ``Pail.work`` loop, every request counted by
botocore hooks:

* **concurrency**: ``--workers`` workers (16) on ``--jobs`` jobs with a limit
  of 3: the most handlers running at once, sampled every 5 ms and at each
  start (must be 3); the same jobs with no limit, for the extra requests per
  job and the failed conditional writes per claim a limit costs;
* **rate**: the same workers with a rate of 5/s: the most handler starts in
  any one second of the server's clock (fixed windows: must be at most 5),
  and, for the record, in any sliding second;
* **fairness**: a big group's ``--big`` jobs (1,000) enqueued before a small
  group's 10, group limit 2: the claim count at which each small job
  starts, against oldest-first (the same jobs without groups, as pailq ran
  them).

    scripts/limits-measure                 the full run
    scripts/limits-measure --quick         small (the test runs this)
"""

from __future__ import annotations

import argparse
import functools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pail import Pail
from pail.local import LocalS3
from pail_bench.counting import RequestCounter, by_operation, diff, failed_conditions, total

BUCKET = "limits"
HANDLER_SECONDS = 0.05
POLL = [20.0]
"""The work loops' longest idle wait (``pail work``'s default; ``--poll``)."""


class Running:
    """How many handlers run at once: the most seen at a start and by a sampler."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most_at_start = 0
        self.most_sampled = 0
        self.samples = 0
        self.starts: list[tuple[float, Any]] = []

    def enter(self, payload: Any) -> None:
        with self._lock:
            self.now += 1
            self.most_at_start = max(self.most_at_start, self.now)
            self.starts.append((time.time(), payload))

    def leave(self) -> None:
        with self._lock:
            self.now -= 1

    def sample(self) -> None:
        with self._lock:
            self.most_sampled = max(self.most_sampled, self.now)
            self.samples += 1


def _handler(running: Running, seconds: float) -> Callable[[Any], Any]:
    def run(payload: Any) -> Any:
        running.enter(payload)
        try:
            time.sleep(seconds)
        finally:
            running.leave()
        return None

    return run


def _connect(server: LocalS3, namespace: str, counter: RequestCounter) -> Pail:
    pail = Pail.connect(BUCKET, queue=namespace, shards=1, **server.connect_kwargs())  # type: ignore[arg-type]
    counter.attach(pail.store.client.meta.events)  # type: ignore[attr-defined]
    return pail


def _work(
    server: LocalS3,
    namespace: str,
    workers: int,
    jobs: int,
    handler: Callable[[Any], Any],
    counter: RequestCounter,
    running: Running,
    *,
    until: Callable[[], bool],
    timeout: float,
) -> dict[str, Any]:
    """Run ``workers`` work loops until ``until()``; the requests they made and how long it took."""
    stop = threading.Event()
    pails = [_connect(server, namespace, counter) for _ in range(workers)]
    before = counter.snapshot()
    began = time.monotonic()
    threads = [
        threading.Thread(
            target=p.work, args=(handler,), kwargs={"stop": stop, "poll_interval": POLL[0]}
        )
        for p in pails
    ]

    def sampler() -> None:
        while not stop.is_set():
            running.sample()
            time.sleep(0.005)

    sampling = threading.Thread(target=sampler)
    try:
        for thread in [*threads, sampling]:
            thread.start()
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in [*threads, sampling]:
            thread.join(timeout=60)
    elapsed = time.monotonic() - began
    counts = diff(counter.snapshot(), before)
    claims = sum(p.write_stats.by_reason.get("claim", 0) for p in pails)  # lost claims
    return {
        "seconds": round(elapsed, 2),
        "requests": by_operation(counts),
        "requests_per_job": round(total(counts) / max(jobs, 1), 2),
        "failed_writes": failed_conditions(counts),
        "failed_writes_per_claim": round(
            failed_conditions(counts) / max(len(running.starts), 1), 3
        ),
        "lost_claims": claims,
        "completed": len(running.starts),
    }


def _all_done(running: Running, jobs: int) -> bool:
    return len(running.starts) >= jobs and running.now == 0


def concurrency(server: LocalS3, workers: int, jobs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, limit in (("no_limit", None), ("limit_3", 3)):
        counter = RequestCounter()
        queue = _connect(server, f"conc-{name.replace('_', '')}", counter)
        if limit is not None:
            queue.set_limit(limit)
        queue.enqueue_many([{"n": n} for n in range(jobs)])
        running = Running()
        figures = _work(
            server,
            queue.keys.namespace,
            workers,
            jobs,
            _handler(running, HANDLER_SECONDS),
            counter,
            running,
            until=functools.partial(_all_done, running, jobs),
            timeout=600,
        )
        figures["most_running_at_a_start"] = running.most_at_start
        figures["most_running_sampled"] = running.most_sampled
        figures["samples"] = running.samples
        out[name] = figures
    out["extra_requests_per_job"] = round(
        out["limit_3"]["requests_per_job"] - out["no_limit"]["requests_per_job"], 2
    )
    return out


def rate(server: LocalS3, workers: int, jobs: int) -> dict[str, Any]:
    counter = RequestCounter()
    queue = _connect(server, "rated", counter)
    queue.set_rate("5/s")
    queue.enqueue_many([{"n": n} for n in range(jobs)])
    running = Running()
    figures = _work(
        server,
        "rated",
        workers,
        jobs,
        _handler(running, 0.01),
        counter,
        running,
        until=lambda: len(running.starts) >= jobs and running.now == 0,
        timeout=600,
    )
    times = sorted(t for t, _ in running.starts)
    per_second = Counter(int(t) for t in times)
    sliding = max((sum(1 for u in times if t <= u < t + 1) for t in times), default=0)
    # The tokens the run took, by their window (the server's clock): at most 5 each.
    tokens = Counter(
        key.rsplit("/", 2)[-2]
        for page in [queue.store.list(queue.keys.rate_tokens(), max_keys=1000)]
        for key in (item.key for item in page.items)
    )
    figures.update(
        {
            "most_starts_in_a_second": max(per_second.values(), default=0),
            "most_starts_in_a_sliding_second": sliding,
            "most_tokens_in_a_window": max(tokens.values(), default=0),
            "starts_per_second": round(len(times) / max(times[-1] - times[0], 1e-9), 2)
            if len(times) > 1
            else 0.0,
        }
    )
    return figures


def fairness(server: LocalS3, workers: int, big: int, small: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, grouped in (("group_limit_2", True), ("oldest_first", False)):
        counter = RequestCounter()
        queue = _connect(server, f"fair-{name.replace('_', '-')}", counter)
        if grouped:
            queue.set_limit(2, group="*")
        for label, count in (("big", big), ("small", small)):
            for at in range(0, count, 1000):
                batch = [{"g": label, "n": n} for n in range(at, min(count, at + 1000))]
                if grouped:
                    queue.enqueue_many(batch, group=label)
                else:
                    queue.enqueue_many(batch)
        running = Running()

        def small_done(running: Running = running) -> bool:
            return sum(1 for _, p in running.starts if p["g"] == "small") >= small

        figures = _work(
            server,
            queue.keys.namespace,
            workers,
            big + small,
            _handler(running, 0.0),
            counter,
            running,
            until=small_done,
            timeout=900,
        )
        small_at = [i + 1 for i, (_, p) in enumerate(running.starts) if p["g"] == "small"]
        out[name] = {
            "small_group_starts_at_claims": small_at,
            "last_small_start": max(small_at) if small_at else None,
            "claims_made": len(running.starts),
            "seconds": figures["seconds"],
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small runs (the test's)")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--big", type=int, default=None)
    parser.add_argument("--out", default=None, help="also write the figures here, as JSON")
    parser.add_argument("--poll", type=float, default=20.0, help="work loops' longest idle wait")
    parser.add_argument(
        "--only", choices=("concurrency", "rate", "fairness"), default=None, help="one run"
    )
    args = parser.parse_args(argv)
    POLL[0] = args.poll
    jobs = args.jobs or (24 if args.quick else 96)
    big = args.big or (60 if args.quick else 1000)
    rate_jobs = 15 if args.quick else 40
    with LocalS3() as server:
        setup = _connect(server, "setup", RequestCounter())
        setup.store.client.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            "concurrency": lambda: concurrency(server, args.workers, jobs),
            "rate": lambda: rate(server, args.workers, rate_jobs),
            "fairness": lambda: fairness(server, min(args.workers, 4), big, 10),
        }
        figures: dict[str, Any] = {"workers": args.workers, "poll_interval": args.poll}
        for name, run in runs.items():
            if args.only in (None, name):
                figures[name] = run()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
