"""CloudWatch metrics from long-running workers: EMF records as JSON lines, one per minute.

The worker Lambda publishes its per-job metrics as CloudWatch embedded metric
format (EMF) at the end of each invocation (``pail.aws.lambda_worker``).
``pail work`` (a Fargate service, a VM) runs for days, so ``EmfReporter``
aggregates instead: it counts the jobs that ended and collects their
durations, and writes **one record per ``every`` seconds** (default 60), or
sooner once 100 durations are waiting (EMF's limit of values per metric), and
a last one when the worker stops. Each record carries the same names,
namespace (``Pail``), units and single dimension (``queue``) as the Lambda's
(``pail.metrics_names``), so the construct's alarms and dashboards see
both kinds of worker. A minute without jobs still writes a record of zeros,
so an alarm sees data, not a gap.

The records go to stdout (or any text stream), one JSON object per line.
CloudWatch Logs extracts the metrics from such lines in a container's log
stream (the ``awslogs`` driver sends each line as a log event); nothing is
sent to CloudWatch by pail itself, and no AWS library is needed.

``--metrics`` (``PAIL_METRICS``) picks it: ``emf``, ``none``, or ``auto``
(the default: ``emf`` inside an ECS task, which the container metadata
variables announce, ``none`` elsewhere).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import IO, Any

from pail import metrics_names
from pail.drain import JobReport, LoggingObserver, Observer, Outcome, Tally
from pail.errors import ConfigurationError
from pail.message import Message

EVERY = 60.0
"""Seconds between two records."""
MAX_VALUES = 100
"""EMF's limit of values per metric in one record: a record goes out when the durations reach it."""
ECS_MARKERS = ("ECS_CONTAINER_METADATA_URI_V4", "ECS_CONTAINER_METADATA_URI")
"""Variables ECS sets in every task's containers."""

COUNTERS: tuple[tuple[str, Callable[[Tally], int]], ...] = (
    (metrics_names.JOBS_PROCESSED, lambda t: t.processed),
    (metrics_names.JOBS_FAILED, lambda t: t.failed),
    (metrics_names.JOBS_RETRIED, lambda t: t.retried),
    (metrics_names.JOBS_DEAD_LETTERED, lambda t: t.dead_lettered),
    (metrics_names.JOBS_RELEASED, lambda t: t.released),
    (metrics_names.JOBS_RETURNED, lambda t: t.returned),
)
"""The Lambda worker's counters, in its order, with how each is read from a ``Tally``."""


class MetricsMode(StrEnum):
    """What ``pail work`` does with metrics."""

    AUTO = "auto"
    EMF = "emf"
    NONE = "none"

    def resolve(self, env: Mapping[str, str]) -> MetricsMode:
        """``auto`` becomes ``emf`` inside an ECS task and ``none`` elsewhere.

        >>> MetricsMode.AUTO.resolve({"ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/x"})
        <MetricsMode.EMF: 'emf'>
        >>> MetricsMode.AUTO.resolve({}), MetricsMode.EMF.resolve({})
        (<MetricsMode.NONE: 'none'>, <MetricsMode.EMF: 'emf'>)
        """
        if self is not MetricsMode.AUTO:
            return self
        return MetricsMode.EMF if any(env.get(name) for name in ECS_MARKERS) else MetricsMode.NONE


def parse_mode(text: str, name: str = "metrics") -> MetricsMode:
    """``emf``, ``none`` or ``auto``.

    >>> parse_mode("EMF")
    <MetricsMode.EMF: 'emf'>
    """
    try:
        return MetricsMode(text.strip().lower())
    except ValueError:
        raise ConfigurationError(f"{name} must be emf, none or auto, got {text!r}") from None


def record(
    namespace: str, tally: Tally, durations_ms: list[float], *, timestamp_ms: int
) -> dict[str, Any]:
    """One EMF record: the counters of ``tally`` and the durations, for queue ``namespace``.

    >>> data = record("reports", Tally(2, 1, 1), [12.5, 30.0], timestamp_ms=0)
    >>> data["queue"], data["JobsProcessed"], data["JobDuration"]
    ('reports', 2, [12.5, 30.0])
    >>> data["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    [['queue']]
    """
    metrics: list[dict[str, str]] = []
    values: dict[str, Any] = {}
    if durations_ms:
        metrics.append({"Name": metrics_names.JOB_DURATION, "Unit": "Milliseconds"})
        values[metrics_names.JOB_DURATION] = [round(d, 3) for d in durations_ms]
    for name, read in COUNTERS:
        metrics.append({"Name": name, "Unit": "Count"})
        values[name] = read(tally)
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": metrics_names.NAMESPACE,
                    "Dimensions": [[metrics_names.DIMENSION_QUEUE]],
                    "Metrics": metrics,
                }
            ],
        },
        metrics_names.DIMENSION_QUEUE: metrics_names.queue_dimension(namespace),
        **values,
    }


class EmfReporter:
    """An ``Observer`` of the drain that writes an EMF record every ``every`` seconds.

    It counts what ``settled`` reports and hands every call on to ``inner``
    (the worker's log lines). A thread wakes every ``every`` seconds and
    writes the record for that period; ``close()`` writes the last one. The
    drain's claims and requests are unchanged: metrics cost no S3 request.
    """

    def __init__(
        self,
        namespace: str,
        *,
        every: float = EVERY,
        stream: IO[str] | None = None,
        inner: Observer | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._namespace = namespace
        self.every = every
        self._stream = stream
        self._inner = inner or LoggingObserver()
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._tally = Tally()
        self._durations: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pail-emf", daemon=True)
        self.records = 0

    def claimed(self, message: Message) -> None:
        self._inner.claimed(message)

    def settled(self, report: JobReport) -> None:
        with self._lock:
            self._tally.add(report)
            if report.outcome is not Outcome.RETURNED:
                self._durations.append(report.duration * 1000)
            full = len(self._durations) >= MAX_VALUES
        if full:
            self.flush()
        self._inner.settled(report)

    def start(self) -> EmfReporter:
        self._thread.start()
        return self

    def flush(self) -> None:
        """Write the record of everything counted since the last one (zeros included)."""
        with self._lock:
            tally, durations = self._tally, self._durations
            self._tally, self._durations = Tally(), []
            data = record(self._namespace, tally, durations, timestamp_ms=int(self._wall() * 1000))
            stream = self._stream or sys.stdout
            # One write per line, under the lock: records never interleave.
            stream.write(json.dumps(data, separators=(",", ":")) + "\n")
            stream.flush()
            self.records += 1

    def close(self) -> None:
        """Stop the timer and write the last record."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.flush()
