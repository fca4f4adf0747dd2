"""What tags cost at enqueue, and what a search costs, on the local S3 server (docs/search.md).

Fills one queue with ``--jobs`` jobs (default 10,000): each tagged with one of
``jobs / 50`` customers, so that a tag matches 50 jobs, and enqueued (their
ULIDs) a minute apart, so that a time window holds a known number of them.
Then times, and counts the requests of:

* a tag search (``customer=acme``: 50 matches), a page of 50;
* a time-range search (a two-hour window in the middle: 120 jobs), a page of 50;
* the same tag search in a two-hour window;
* for comparison, what a search without the index would list: every key under ``queue/``.

And the cost of tags per job: sequential enqueues of untagged, one-tag and
two-tag jobs (requests, bytes written, microseconds each).

    scripts/search-cost                  10,000 jobs
    scripts/search-cost --jobs 1000      a smaller queue: the search costs do not change
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from ulid import ULID

from pail import MemoryStore, Pail
from pail.local import LocalS3
from pail.store.listing import pages
from pail_bench.counting import RequestCounter, by_operation, diff

BUCKET = "search"


def _counted(counter: RequestCounter, run: Any) -> tuple[Any, dict[str, int], float]:
    before = counter.snapshot()
    began = time.perf_counter()
    value = run()
    elapsed = time.perf_counter() - began
    return value, dict(by_operation(diff(counter.snapshot(), before))), elapsed


def _fill(pail: Pail, jobs: int, start: datetime) -> None:
    ids = [str(ULID.from_datetime(start + timedelta(minutes=n))) for n in range(jobs)]
    customers = max(1, jobs // 50)
    tags = [
        {"customer": "acme" if n % customers == 0 else f"c{n % customers}"} for n in range(jobs)
    ]
    for at in range(0, jobs, 1000):
        pail.enqueue_many(
            [{"n": n} for n in range(at, min(jobs, at + 1000))],
            ids=ids[at : at + 1000],
            tags=tags[at : at + 1000],
            max_workers=32,
        )


def _searches(
    pail: Pail, counter: RequestCounter, start: datetime, jobs: int, repeat: int
) -> dict[str, Any]:
    middle = start + timedelta(minutes=jobs // 2)
    window = {"since": middle, "until": middle + timedelta(minutes=119)}  # 120 jobs
    cases: dict[str, dict[str, Any]] = {
        "tag": {"tags": {"customer": "acme"}},
        "time range": dict(window),
        "tag in time range": {"tags": {"customer": "acme"}, **window},
    }
    figures: dict[str, Any] = {}
    for name, query in cases.items():
        times = []
        for _ in range(repeat):
            page, requests, elapsed = _counted(
                counter, lambda query=query: pail.search(limit=50, **query)
            )
            times.append(elapsed)
        figures[name] = {
            "matches_shown": len(page.jobs),
            "more": page.more,
            "requests": requests,
            "requests_total": sum(requests.values()),
            "stated_by_the_page": dict(page.requests),
            "seconds_median": round(statistics.median(times), 4),
        }
    _, requests, elapsed = _counted(
        counter, lambda: sum(len(p.items) for p in pages(pail.store, pail.keys.prefix("queue/")))
    )
    figures["without an index: list queue/ whole"] = {
        "requests": requests,
        "seconds": round(elapsed, 4),
    }
    return figures


KINDS: dict[str, dict[str, str] | None] = {
    "no tags": None,
    "1 tag": {"customer": "acme"},
    "2 tags": {"customer": "acme", "kind": "export"},
}


def _per_job(pail: Pail, counter: RequestCounter, count: int) -> dict[str, Any]:
    """Enqueues of each kind, interleaved (a loaded machine slows all kinds alike).

    Requests and bytes per job on the local server, wall microseconds there,
    and the CPU microseconds pail itself spends (on the in-memory store: no I/O).
    """
    times: dict[str, list[float]] = {name: [] for name in KINDS}
    requests: dict[str, Counter[str]] = {name: Counter() for name in KINDS}
    for tags in KINDS.values():
        pail.enqueue({"warm": True}, tags=tags)
    for n in range(count):
        for name, tags in KINDS.items():
            before = counter.snapshot()
            began = time.perf_counter()
            pail.enqueue({"report_id": f"r{n}", "format": "pdf"}, tags=tags)
            times[name].append(time.perf_counter() - began)
            requests[name].update(by_operation(diff(counter.snapshot(), before)))
    memory = Pail(MemoryStore("cpu"))
    figures: dict[str, Any] = {}
    for name, tags in KINDS.items():
        job_id = pail.enqueue({"report_id": "r0", "format": "pdf"}, tags=tags)
        entry = pail.store.get(pail.keys.queue(job_id))
        cpu = []
        for n in range(count):
            began = time.process_time()
            memory.enqueue({"report_id": f"r{n}", "format": "pdf"}, tags=tags)
            cpu.append(time.process_time() - began)
        figures[name] = {
            "requests_per_job": {op: k / count for op, k in requests[name].items()},
            "entry_bytes": len(entry.body) if entry else None,
            "index_objects": len(tags or {}),
            "wall_microseconds_median": round(statistics.median(times[name]) * 1e6),
            "cpu_microseconds_mean_in_memory": round(statistics.fmean(cpu) * 1e6, 1),
        }
    return figures


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and print it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--per-job", type=int, default=300)
    args = parser.parse_args(argv)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    with LocalS3() as server:
        pail = Pail.connect(BUCKET, **server.connect_kwargs())  # type: ignore[arg-type]
        pail.store.client.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        counter = RequestCounter()
        counter.attach(pail.store.client.meta.events)  # type: ignore[attr-defined]
        began = time.perf_counter()
        _fill(pail, args.jobs, start)
        filled = time.perf_counter() - began
        result = {
            "jobs": args.jobs,
            "fill_seconds": round(filled, 1),
            "searches": _searches(pail, counter, start, args.jobs, args.repeat),
            "tags_per_job": _per_job(pail, counter, args.per_job),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
