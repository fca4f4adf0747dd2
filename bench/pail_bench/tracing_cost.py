"""What OpenTelemetry tracing costs a job: requests, bytes and microseconds (docs/tracing.md).

One process, the in-memory store (no I/O: what is measured is pail's own
work), ``--jobs`` jobs enqueued and worked two ways: with no tracer provider
(the API's default: pail makes no span and writes no field), then with the
SDK recording every span into its in-memory exporter. A ``CountingStore`` counts the
requests each job makes (what S3 would bill), and the pending entry's bytes.

    scripts/tracing-cost
    scripts/tracing-cost --jobs 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from pail import MemoryStore, Pail
from pail.store.counting import CountingStore


def _round(pail: Pail, jobs: int) -> tuple[float, float, int]:
    """CPU microseconds per enqueue and per worked job, and the pending entry's bytes."""
    pail.enqueue({"warm": True})
    pail.work_once(lambda payload: None)
    began = time.process_time()
    for n in range(jobs):
        pail.enqueue({"report_id": f"r{n}", "format": "pdf"})
    enqueue = (time.process_time() - began) / jobs
    (entry, *_) = pail.store.list("queue/").items
    size = entry.size
    began = time.process_time()
    while pail.work_once(lambda payload: {"ok": True}):
        pass
    work = (time.process_time() - began) / jobs
    return enqueue * 1e6, work * 1e6, size


def _measure(label: str, jobs: int, repeat: int) -> dict[str, Any]:
    enqueues, works, size, requests = [], [], 0, 0
    for _ in range(repeat):
        store = CountingStore(MemoryStore("cost"))
        pail = Pail(store)
        enqueue, work, size = _round(pail, jobs)
        enqueues.append(enqueue)
        works.append(work)
        requests = store.total()
    return {
        "setting": label,
        "requests_per_job": round(requests / (jobs + 1), 2),
        "entry_bytes": size,
        "enqueue_cpu_us": round(statistics.median(enqueues), 1),
        "work_once_cpu_us": round(statistics.median(works), 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the three settings' figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    results = [_measure("no tracer provider", args.jobs, args.repeat)]
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with trace.get_tracer("bench").start_as_current_span("request"):
        results.append(_measure("SDK, every span recorded", args.jobs, args.repeat))
    spans = len(exporter.get_finished_spans())
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "spans_per_job": round(spans / (args.jobs * args.repeat), 2),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
