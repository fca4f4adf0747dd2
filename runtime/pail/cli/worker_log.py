"""What ``pail work`` and ``pail work-once`` say on stderr: log level and format, and the idle line.

* ``worker_logging`` installs one stderr handler for the run (text, or one
  JSON object per line for log shippers), with each record's ``job_id`` and
  ``attempt``, and takes it away afterwards. botocore's INFO lines ("Found
  credentials in environment variables.") are kept out below ``debug``.
* ``IdleReporter`` logs a line at most every ``every`` seconds while no job
  has started or run, so an operator tailing an idle worker sees it is
  alive and polling, not hung.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from pail import log_keys
from pail.drain import JobReport, LoggingObserver, Observer
from pail.message import Message
from pail.operate.text import duration

LogFormat = Literal["text", "json"]
LEVELS = ("debug", "info", "warning", "error")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
QUIET_LIBRARIES = ("botocore", "boto3", "urllib3", "s3transfer")
"""Loggers held at WARNING unless the level is debug: their INFO lines are not the worker's news."""
IDLE_EVERY = 60.0
"""Seconds between two idle lines while a worker has nothing to do."""

log = logging.getLogger("pail.work")

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, job keys, extras, exception.

    >>> record = logging.LogRecord("pail.work", logging.INFO, "", 0, "idle %s", ("1m",), None)
    >>> record.created = 0.0
    >>> JsonFormatter().format(record)
    '{"time": "1970-01-01T00:00:00.000Z", "level": "INFO", "logger": "pail.work", "message": "idle 1m"}'
    """

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        data: dict[str, Any] = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                data[key] = value  # job_id, attempt, and extra= fields
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def level_number(name: str) -> int:
    """``"info"`` -> ``logging.INFO``.

    >>> level_number("warning") == logging.WARNING
    True
    """
    number = logging.getLevelName(name.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {name!r}")
    return number


@contextmanager
def worker_logging(level: str = "info", fmt: LogFormat = "text") -> Iterator[None]:
    """Log to stderr at ``level`` in ``fmt`` for the duration of the block, then restore.

    Restoring matters when the command runs in a process that goes on (a
    test runner, an embedding program): the handler holds the stderr of
    this invocation.
    """
    number = level_number(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    log_keys.install(handler)
    root = logging.getLogger()
    touched = [root, logging.getLogger("pail"), *map(logging.getLogger, QUIET_LIBRARIES)]
    saved = [(logger, logger.level) for logger in touched]
    root.addHandler(handler)
    root.setLevel(number)
    logging.getLogger("pail").setLevel(number)
    quiet = number if number <= logging.DEBUG else max(number, logging.WARNING)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(quiet)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for logger, previous in saved:
            logger.setLevel(previous)


class IdleReporter:
    """An ``Observer`` of the drain that also logs, at most every ``every`` s, that nothing runs.

    It delegates each job's lines to ``LoggingObserver``. A thread wakes
    every ``every`` seconds and logs an idle line if no job started in that
    time and none is running; the run's claims and requests are unchanged.
    """

    def __init__(
        self,
        *,
        every: float = IDLE_EVERY,
        poll_interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        inner: Observer | None = None,
    ) -> None:
        self.every = every
        self._poll_interval = poll_interval
        self._clock = clock
        self._inner = inner or LoggingObserver()
        self._lock = threading.Lock()
        self._started = 0
        self._running = 0
        self._since = clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pail-idle-reporter", daemon=True)

    def claimed(self, message: Message) -> None:
        with self._lock:
            self._started += 1
            self._running += 1
        self._inner.claimed(message)

    def settled(self, report: JobReport) -> None:
        with self._lock:
            self._running = max(0, self._running - 1)
            self._since = self._clock()
        self._inner.settled(report)

    def start(self) -> IdleReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def check(self, seen: int) -> int:
        """Log the idle line if no job started since ``seen`` and none runs; the new count."""
        with self._lock:
            started, running, since = self._started, self._running, self._since
        if started == seen and running == 0:
            polling = (
                f"; polling every {self._poll_interval:g} s at most"
                if self._poll_interval is not None
                else ""
            )
            log.info("idle for %s: no job to run%s", duration(self._clock() - since), polling)
        return started

    def _loop(self) -> None:
        seen = 0
        while not self._stop.wait(self.every):
            seen = self.check(seen)
