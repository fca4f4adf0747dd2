"""Limits on the local S3 server, measured (docs/limits.md has the figures).

Three runs, each on its own queue of one server (127.0.0.1), every worker a
thread with its own client and ``Pail.work`` loop, every request counted by
botocore hooks:

* **concurrency**: ``--workers`` workers (16) on ``--jobs`` jobs (400) with a
  limit of 3: the most handlers running at once, sampled every 5 ms and at
  each start (must be 3); the same jobs with no limit, side by side and
  ``--rounds`` times (2), for the extra requests per job (by kind of request
  and key: ``extra_by_kind``) and the failed conditional writes per claim a
  limit costs;
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
from urllib.parse import unquote

from pail import Pail
from pail.local import LocalS3
from pail_bench.counting import EVENT, RequestCounter, by_operation, diff, failed_conditions, total

BUCKET = "limits"
HANDLER_SECONDS = 0.05
GATHER_BOUND = 30.0
"""The longest a quick run's handler waits for the limit's worth of company (``Running.gather``)."""
POLL = [20.0]
"""The work loops' longest idle wait (``pail work``'s default; ``--poll``)."""


class Running:
    """How many handlers run at once: the most seen at a start and by a sampler."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
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
            self._lock.notify_all()

    def gather(self, target: int, total: int, bound: float) -> None:
        """Wait until ``target`` handlers run at once, every job has started, or ``bound`` s pass.

        The quick run's handlers take 50 ms: on a loaded machine 16 workers
        could claim so slowly that three never overlapped, and "at most 3"
        then said nothing about the limit. Holding each handler until the
        limit's worth of them run makes the limit bind whatever the load; a
        gate that let a fourth in would show 4.
        """
        with self._lock:
            self._lock.wait_for(
                lambda: self.now >= target or len(self.starts) >= total, timeout=bound
            )

    def leave(self) -> None:
        with self._lock:
            self.now -= 1

    def sample(self) -> None:
        with self._lock:
            self.most_sampled = max(self.most_sampled, self.now)
            self.samples += 1


def _handler(
    running: Running, seconds: float, gather: tuple[int, int] | None = None
) -> Callable[[Any], Any]:
    """A handler of ``seconds``; with ``gather=(target, total)`` it first waits for company."""

    def run(payload: Any) -> Any:
        running.enter(payload)
        try:
            if gather is not None:
                running.gather(*gather, bound=GATHER_BOUND)
            time.sleep(seconds)
        finally:
            running.leave()
        return None

    return run


class KindCounter:
    """Requests by operation, HTTP status and the kind of key they name (``run``, ``slots`` ...).

    What ``RequestCounter`` counts, split by the key's place in the queue's
    layout, so a limit's extra requests can be told apart: the slot's PUT and
    DELETE, the LISTs of ``_pail/slots/``, the GETs of ``_pail/limits``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def attach(self, events: Any) -> None:
        events.register(EVENT, self._on_attempt, unique_id=f"pail-kinds-{id(self)}")

    def _on_attempt(
        self, response: Any = None, operation: Any = None, request_dict: Any = None, **_: Any
    ) -> None:
        status = 0 if response is None else int(response[0].status_code)
        name = operation.name if operation is not None else "?"
        with self._lock:
            self.calls[f"{name} {status} {_kind(request_dict)}"] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self.calls.items()))


KINDS = KindCounter()
"""Every run's requests by kind (each run diffs its own)."""


def _kind(request: Any) -> str:
    """The kind of key a request names: its first segment after the queue, or ``_pail/{name}``."""
    if not isinstance(request, dict):
        return "?"
    query = request.get("query_string") or {}
    key = query.get("prefix") if isinstance(query, dict) and "prefix" in query else None
    if key is None:
        key = unquote(str(request.get("url_path", ""))).lstrip("/")  # {namespace}/{key}
    parts = key.split("/")
    rest = parts[1:] if len(parts) > 1 else parts  # past the namespace
    if rest and rest[0] == "_pail" and len(rest) > 1:
        return f"_pail/{rest[1]}"
    return rest[0] if rest else "?"


def _connect(server: LocalS3, namespace: str, counter: RequestCounter) -> Pail:
    pail = Pail.connect(BUCKET, queue=namespace, shards=1, **server.connect_kwargs())  # type: ignore[arg-type]
    counter.attach(pail.store.client.meta.events)  # type: ignore[attr-defined]
    KINDS.attach(pail.store.client.meta.events)  # type: ignore[attr-defined]
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
    kinds_before = KINDS.snapshot()
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
        "requests_by_kind": diff(KINDS.snapshot(), kinds_before),
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


def concurrency(
    server: LocalS3, workers: int, jobs: int, rounds: int, *, gather: bool = False
) -> dict[str, Any]:
    """The same workload with and without a limit of 3, side by side, ``rounds`` times.

    The workload is the round-2 claim benchmark's contention run (400 jobs
    raced by 16 workers; ``docs/performance.md``), with 50 ms handlers: a
    small backlog (96 jobs for 16 workers) measures the workers' race for a
    few entries, whose failed writes swing from 0.3 to 0.7 per claim from one
    run to the next with no limit at all. The sides alternate, so a change in
    the machine's load hits both alike. With ``gather`` (the quick run) each
    handler first waits until 3 run at once (``Running.gather``).
    """
    out: dict[str, Any] = {"jobs": jobs, "rounds": []}
    for round_ in range(rounds):
        pair: dict[str, Any] = {}
        for name, limit in (("no_limit", None), ("limit_3", 3)):
            counter = RequestCounter()
            queue = _connect(server, f"conc-{name.replace('_', '')}-{round_}", counter)
            if limit is not None:
                queue.set_limit(limit)
            queue.enqueue_many([{"n": n} for n in range(jobs)])
            running = Running()
            figures = _work(
                server,
                queue.keys.namespace,
                workers,
                jobs,
                _handler(running, HANDLER_SECONDS, (3, jobs) if gather else None),
                counter,
                running,
                until=functools.partial(_all_done, running, jobs),
                timeout=600,
            )
            figures["most_running_at_a_start"] = running.most_at_start
            figures["most_running_sampled"] = running.most_sampled
            figures["samples"] = running.samples
            pair[name] = figures
        pair["extra_requests_per_job"] = round(
            pair["limit_3"]["requests_per_job"] - pair["no_limit"]["requests_per_job"], 2
        )
        pair["extra_by_kind"] = _extra_by_kind(
            pair["no_limit"]["requests_by_kind"], pair["limit_3"]["requests_by_kind"], jobs
        )
        out["rounds"].append(pair)
    out["summary"] = {
        "extra_requests_per_job": [pair["extra_requests_per_job"] for pair in out["rounds"]],
        "failed_writes_per_claim": {
            side: [pair[side]["failed_writes_per_claim"] for pair in out["rounds"]]
            for side in ("no_limit", "limit_3")
        },
        "most_running_at_a_start": {
            side: max(pair[side]["most_running_at_a_start"] for pair in out["rounds"])
            for side in ("no_limit", "limit_3")
        },
    }
    return out


def _extra_by_kind(base: dict[str, int], limited: dict[str, int], jobs: int) -> dict[str, float]:
    """Per job, what the limited run sent more (or fewer) of each request kind than the base."""
    kinds = sorted(set(base) | set(limited))
    deltas = {
        kind: round((limited.get(kind, 0) - base.get(kind, 0)) / max(jobs, 1), 3) for kind in kinds
    }
    return {kind: delta for kind, delta in deltas.items() if delta}


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
    parser.add_argument(
        "--rounds", type=int, default=None, help="concurrency: repeats of both sides"
    )
    parser.add_argument("--out", default=None, help="also write the figures here, as JSON")
    parser.add_argument("--poll", type=float, default=20.0, help="work loops' longest idle wait")
    parser.add_argument(
        "--only", choices=("concurrency", "rate", "fairness"), default=None, help="one run"
    )
    args = parser.parse_args(argv)
    POLL[0] = args.poll
    jobs = args.jobs or (24 if args.quick else 400)
    rounds = args.rounds or (1 if args.quick else 2)
    # 300, not 60: claims pick among the first keys listed, not strictly the oldest, so
    # with 60 ahead oldest-first could reach the small group by claim 26 (it did once in 7 runs).
    big = args.big or (300 if args.quick else 1000)
    rate_jobs = 15 if args.quick else 40
    with LocalS3() as server:
        setup = _connect(server, "setup", RequestCounter())
        setup.store.client.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        runs: dict[str, Callable[[], dict[str, Any]]] = {
            "concurrency": lambda: concurrency(
                server, args.workers, jobs, rounds, gather=args.quick
            ),
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
