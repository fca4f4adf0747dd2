"""OpenTelemetry traces from the producer to the handler, when OpenTelemetry is there.

``pip install 'pailq[otel]'`` brings the API only; an application that
configures a tracer provider (the SDK, the ADOT Lambda layer, any
distribution) gets:

* at enqueue, a ``send`` span (kind PRODUCER; one per ``enqueue_many``
  batch), whose W3C context (``traceparent``, ``tracestate``) travels in the
  job's envelope (``Envelope.trace``; pailq 0.1.1's reader reads past it);
* per attempt, a ``receive`` span for the claim (CLIENT, recorded once a job
  was claimed: an empty poll makes none), then a ``process`` span (CONSUMER)
  around the handler: a child of the producer's span, or, when the worker
  already has a span of its own (a Lambda invocation's), a child of that
  with a link to the producer's; the handler's spans are its children and
  its exception is recorded on it;
* a ``settle`` span (CLIENT) for recording the outcome. No span per heartbeat.

Attributes follow the OpenTelemetry messaging conventions:
``messaging.system`` ``pail``, ``messaging.operation.type`` / ``.name``,
``messaging.destination.name`` ``{bucket}/{queue}``, ``messaging.message.id``
the job id, and ``pail.attempt``, ``pail.outcome``.

Without the ``opentelemetry`` package, or with no tracer provider set (the
API's default proxy), every function here returns at once and no field is
written: untraced jobs pay nothing. pail looks for a provider at most once a
second until it finds one (``LOOK_EVERY``). docs/tracing.md.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pail.codec import read_trace

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("pail")

SYSTEM = "pail"

Carrier = dict[str, str]

_trace_api: Any = None
_missing = False


def _api() -> Any:
    """The ``opentelemetry.trace`` module, or None when it is not installed (looked for once)."""
    global _missing, _trace_api
    if _trace_api is not None or _missing:
        return _trace_api
    try:
        from opentelemetry import trace
    except ImportError:
        _missing = True
        return None
    _trace_api = trace
    return trace


LOOK_EVERY = 1.0
"""Seconds between two looks for a tracer provider while there is none (a look costs ~1 us)."""
_found: Tracer | None = None
_next_look = 0.0


def _tracer() -> Tracer | None:
    """pail's tracer, or None when OpenTelemetry is absent or no provider is configured.

    Once found, kept (a provider is set once per process). While there is none,
    pail looks again at most every ``LOOK_EVERY`` seconds, so an untraced job
    pays a clock read, not a provider lookup, at each step.
    """
    global _found, _next_look
    if _found is not None:
        return _found
    now = time.monotonic()
    if now < _next_look:
        return None
    _next_look = now + LOOK_EVERY
    trace = _api()
    if trace is None:
        _next_look = float("inf")  # not installed: it will not appear
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    _found = provider.get_tracer("pail")
    return _found


def enabled() -> bool:
    """True when spans are made: OpenTelemetry is installed and a tracer provider is set."""
    return _tracer() is not None


def _attributes(destination: str, operation: str, kind: str, job_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": kind,
        "messaging.operation.name": operation,
        "messaging.destination.name": destination,
    }
    if job_id is not None:
        attributes["messaging.message.id"] = job_id
    return attributes


@contextlib.contextmanager
def sending(destination: str, count: int = 1) -> Iterator[Carrier | None]:
    """A ``send`` span around an enqueue (or a batch); yields the context the jobs carry, or None."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    attributes = _attributes(destination, "enqueue", "send", None)
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with tracer.start_as_current_span(
        f"send {destination}", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        carrier: Carrier = {}
        TraceContextTextMapPropagator().inject(carrier)
        yield read_trace(carrier)


def sent(job_id: str) -> None:
    """Name the job on the current ``send`` span (a single enqueue: its id is its message id)."""
    trace = _api()
    if trace is not None:
        trace.get_current_span().set_attribute("messaging.message.id", job_id)


def claim_started() -> int:
    """A claim's start, for ``claimed`` (nanoseconds; 0 when no span will be made: no clock read)."""
    return time.time_ns() if enabled() else 0


def claimed(
    destination: str, job_id: str, attempt: int, started_ns: int, carrier: Mapping[str, str]
) -> None:
    """Record the ``receive`` span of a claim that won a job (from ``started_ns`` to now).

    Made once the job is known, so it joins the producer's trace as ``process`` does.
    """
    if not started_ns:
        return  # no tracer when the claim started: no span
    tracer = _tracer()
    if tracer is None:
        return
    from opentelemetry.trace import SpanKind

    parent, links = _parent_and_links(carrier)
    attributes = _attributes(destination, "claim", "receive", job_id)
    attributes["pail.attempt"] = attempt
    span = tracer.start_span(
        f"receive {destination}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        links=links,
        start_time=started_ns,
    )
    span.end()


def _parent_and_links(carrier: Mapping[str, str]) -> tuple[Any, list[Any]]:
    """A consumer span's parent and links: the producer's span is always a link; it is the
    parent too unless this thread already has a span of its own (a Lambda invocation's)."""
    from opentelemetry import trace
    from opentelemetry.trace import Link
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    produced = TraceContextTextMapPropagator().extract(dict(carrier)) if carrier else None
    producer = trace.get_current_span(produced).get_span_context() if produced else None
    links = [Link(producer)] if producer is not None and producer.is_valid else []
    current = trace.get_current_span().get_span_context()
    return (None if current.is_valid else produced), links


class Attempt:
    """The ``process`` span of one attempt (a no-op without a tracer)."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def outcome(self, outcome: str, error: str | None = None) -> None:
        """Say how the attempt ended (``pail.outcome``); a failure sets the span's status to error."""
        if self.span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("pail.outcome", outcome)
        if outcome != "succeeded":
            self.span.set_status(Status(StatusCode.ERROR, error or outcome))

    def context(self) -> Any:
        """The context to run the handler in (its thread attaches it), or None."""
        if self.span is None:
            return None
        from opentelemetry import trace

        return trace.set_span_in_context(self.span)


@contextlib.contextmanager
def processing(
    destination: str, job_id: str, attempt: int, carrier: Mapping[str, str]
) -> Iterator[Attempt]:
    """The ``process`` span of one attempt: child of the producer's span, or linked to it."""
    tracer = _tracer()
    if tracer is None:
        yield Attempt(None)
        return
    from opentelemetry.trace import SpanKind

    parent, links = _parent_and_links(carrier)
    attributes = _attributes(destination, "process", "process", job_id)
    attributes["pail.attempt"] = attempt
    with tracer.start_as_current_span(
        f"process {destination}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield Attempt(span)


@contextlib.contextmanager
def settling(destination: str, job_id: str, operation: str) -> Iterator[None]:
    """A ``settle`` span around recording an attempt's outcome (complete, fail, release)."""
    tracer = _tracer()
    if tracer is None:
        yield
        return
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(
        f"settle {destination}",
        kind=SpanKind.CLIENT,
        attributes=_attributes(destination, operation, "settle", job_id),
    ):
        yield


def attach(context: Any) -> object | None:
    """Make ``context`` (``Attempt.context()``) current in this thread; a token for ``detach``."""
    if context is None:
        return None
    from opentelemetry import context as otel_context

    return otel_context.attach(context)


def detach(token: object | None) -> None:
    """Undo ``attach``."""
    if token is None:
        return
    from opentelemetry import context as otel_context

    otel_context.detach(token)  # type: ignore[arg-type]


def record(error: BaseException) -> None:
    """Record the handler's exception on the current span (its attempt's ``process`` span)."""
    trace = _api()
    if trace is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.record_exception(error)


def destination(bucket: str, namespace: str) -> str:
    """``messaging.destination.name``: the bucket and the queue (``{bucket}/{queue}``).

    >>> destination("jobs", ""), destination("jobs", "reports")
    ('jobs/(default)', 'jobs/reports')
    """
    return f"{bucket}/{namespace or '(default)'}"
