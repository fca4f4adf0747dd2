"""Powertools for pail's Lambda functions: structured logs, EMF metrics, optional tracing.

* **Logger**: JSON lines on stdout. The service name is ``POWERTOOLS_SERVICE_NAME``,
  else ``pail-worker`` or ``pail-reaper``. While an invocation runs, the
  runtime's own records (the ``pail`` logger: heartbeats, settling) go through
  the same handler, so they carry the same keys (queue, job id, attempt).
* **Metrics**: CloudWatch embedded metric format, printed at the end of each
  invocation. Always namespace ``Pail`` and the single dimension ``queue``
  (``pail.metrics_names``): that is what the construct's alarms select, so
  neither ``POWERTOOLS_METRICS_NAMESPACE`` nor a ``service`` dimension applies.
  The metrics object is private to pail (not Powertools' shared ``Metrics``),
  so a handler's own ``Metrics`` are never flushed under pail's namespace.
* **Tracer**: only when ``PAIL_TRACING`` is true (X-Ray; needs ``aws-xray-sdk``,
  which the ``lambda`` extra installs). Boto is not patched: the lease
  heartbeat runs in a thread that has no trace segment.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from pail import metrics_names
from pail.config import ENV_TRACING, parse_flag, resolve
from pail.errors import ConfigurationError

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
"""Powertools' own variable: the ``service`` key of every log line."""

WORKER_SERVICE = "pail-worker"
REAPER_SERVICE = "pail-reaper"
RUNTIME_LOGGER = "pail"

COUNT = MetricUnit.Count
SECONDS = MetricUnit.Seconds
MILLISECONDS = MetricUnit.Milliseconds


def service_name(default: str, env: Mapping[str, str] | None = None) -> str:
    """``POWERTOOLS_SERVICE_NAME`` if set, else ``default``.

    >>> service_name("pail-worker", {}), service_name("x", {"POWERTOOLS_SERVICE_NAME": "reports"})
    ('pail-worker', 'reports')
    """
    env = os.environ if env is None else env
    return env.get(ENV_SERVICE_NAME) or default


def build_logger(default_service: str, env: Mapping[str, str] | None = None) -> Logger:
    """A Powertools ``Logger`` for one of pail's functions."""
    return Logger(service=service_name(default_service, env))


def build_metrics(namespace: str) -> EphemeralMetrics:
    """An EMF metrics set in namespace ``Pail`` with ``queue`` as its only dimension.

    ``namespace`` is the queue's namespace (``""`` for the default queue).
    """
    # service="" keeps Powertools from adding a `service` dimension (from
    # POWERTOOLS_SERVICE_NAME), which would make the alarms' {queue} metric miss.
    metrics = EphemeralMetrics(namespace=metrics_names.NAMESPACE, service="")
    metrics.set_default_dimensions(
        **{metrics_names.DIMENSION_QUEUE: metrics_names.queue_dimension(namespace)}
    )
    return metrics


def build_tracer(default_service: str, env: Mapping[str, str] | None = None) -> Tracer | None:
    """A Powertools ``Tracer`` when ``PAIL_TRACING`` is true, else None."""
    if not resolve(None, ENV_TRACING, env, default=False, parse=parse_flag):
        return None
    if importlib.util.find_spec("aws_xray_sdk") is None:  # pragma: no cover - the install
        raise ConfigurationError(
            f"{ENV_TRACING} is on but aws-xray-sdk is not installed: pip install 'pailq[lambda]'"
        )
    from aws_lambda_powertools import Tracer

    return Tracer(service=service_name(default_service, env), auto_patch=False)


@contextmanager
def runtime_logs_through(logger: Logger) -> Iterator[None]:
    """While the block runs, send the ``pail`` logger's records through ``logger``'s handler.

    They then carry the keys appended to ``logger`` (queue, job id, attempt)
    and are formatted as JSON like the rest. The ``pail`` logger's handlers,
    level and propagation are restored afterwards, so nothing outside the
    invocation changes.
    """
    runtime = logging.getLogger(RUNTIME_LOGGER)
    if logger.name == RUNTIME_LOGGER or logger.name.startswith(RUNTIME_LOGGER + "."):
        yield  # the Powertools logger is the runtime's logger already
        return
    saved = (list(runtime.handlers), runtime.level, runtime.propagate)
    runtime.handlers = [logger.registered_handler]
    runtime.setLevel(logger.log_level)
    runtime.propagate = False
    try:
        yield
    finally:
        runtime.handlers, level, runtime.propagate = saved[0], saved[1], saved[2]
        runtime.setLevel(level)


def is_lambda_context(context: object) -> bool:
    """True for a Lambda context object: what Powertools' ``inject_lambda_context`` reads.

    A local call (no context, or a bare object) skips the context keys.
    """
    needed = ("function_name", "memory_limit_in_mb", "invoked_function_arn", "aws_request_id")
    return all(hasattr(context, name) for name in needed)
