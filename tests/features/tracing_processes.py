"""The two processes of ``test_tracing``: a producer and a ``pail work`` worker, each with the SDK.

Run as ``python -m tests.features.tracing_processes produce|work|lambda ARGS_JSON``. Each
sets up an SDK ``TracerProvider`` with the in-memory exporter, does its part,
and prints the spans it finished as JSON lines (one per span) on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _hex(number: int, width: int) -> str:
    return f"{number:0{width}x}"


def as_json(span: ReadableSpan) -> dict[str, Any]:
    """What a test checks of a finished span."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": _hex(context.trace_id, 32),
        "span_id": _hex(context.span_id, 16),
        "parent_id": _hex(span.parent.span_id, 16) if span.parent else None,
        "attributes": dict(span.attributes or {}),
        "links": [
            {"trace_id": _hex(link.context.trace_id, 32), "span_id": _hex(link.context.span_id, 16)}
            for link in span.links
        ],
        "events": [event.name for event in span.events],
        "status": span.status.status_code.name,
    }


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    """The worker's handler: a span of its own, and a failure when the payload asks for one."""
    with trace.get_tracer("handler").start_as_current_span("handler work"):
        if payload.get("fail"):
            raise RuntimeError("the handler failed on purpose")
        return {"done": payload["n"]}


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    role, args = sys.argv[1], json.loads(sys.argv[2])
    if role == "produce":
        from pail import Pail

        queue = Pail.connect(args["bucket"], **args["connect"])
        with trace.get_tracer("producer").start_as_current_span("request"):
            ids = [queue.enqueue(payload) for payload in args["payloads"]]
        print(json.dumps({"ids": ids}))
    elif role == "lambda":
        # The worker Lambda's handler, inside the invocation span the ADOT layer's wrapper makes.
        from pail import Pail
        from pail.aws.lambda_worker import lambda_worker
        from tests.support.lambdas import FakeContext

        queue = Pail.connect(args["bucket"], **args["connect"])
        with trace.get_tracer("wrapper").start_as_current_span("invocation"):
            summary = lambda_worker(handle, pail=queue)({}, FakeContext(remaining=900))
        print(json.dumps({"lambda_processed": summary["processed"]}))
    else:
        from pail.cli import run_command

        code = run_command(args["argv"])
        print(json.dumps({"exit_code": code}))
    provider.force_flush()
    for span in exporter.get_finished_spans():
        print(json.dumps({"span": as_json(span)}))


if __name__ == "__main__":
    main()
