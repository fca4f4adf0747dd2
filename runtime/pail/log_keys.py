"""Which job a log record is about: kept per thread of execution, never process-wide.

A worker's log lines carry the job's ``job_id`` and ``attempt``. Those keys
must follow the code that logs, not the process: a handler released near a
deadline runs on in its abandoned thread (Python cannot kill a thread), and
in a warm Lambda container its late lines must not carry the next job's id.
So the keys live in a context variable, set in the handler's own thread when
it starts (and in the supervising thread while it handles the job), and
``JobKeysFilter`` copies them onto each record as it is emitted.

>>> import logging
>>> record = logging.LogRecord("pail", logging.INFO, __file__, 1, "hello", None, None)
>>> with about_job("01J0000000000000000000000A", 2):
...     _ = JobKeysFilter().filter(record)
>>> record.job_id, record.attempt
('01J0000000000000000000000A', 2)
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

JOB_ID = "job_id"
ATTEMPT = "attempt"

_job: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "pail_log_job", default=None
)


def set_job(job_id: str, attempt: int) -> None:
    """Attribute this thread's log records to a job from now on (a handler thread, at its start)."""
    _job.set((job_id, attempt))


@contextmanager
def about_job(job_id: str, attempt: int) -> Iterator[None]:
    """Attribute the records logged in this block, in this thread, to a job."""
    token = _job.set((job_id, attempt))
    try:
        yield
    finally:
        _job.reset(token)


def current_keys() -> tuple[str, int] | None:
    """``(job_id, attempt)`` of the job the calling thread works on, or None."""
    return _job.get()


class JobKeysFilter(logging.Filter):
    """Adds ``job_id`` and ``attempt`` to records emitted while a job is set in the emitting thread.

    Install it on a handler (the Lambda worker puts it on its Powertools
    logger's handler). Keys a record already carries are kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        keys = _job.get()
        if keys is not None:
            if not hasattr(record, JOB_ID):
                setattr(record, JOB_ID, keys[0])
            if not hasattr(record, ATTEMPT):
                setattr(record, ATTEMPT, keys[1])
        return True


def install(handler: logging.Handler) -> None:
    """Put a ``JobKeysFilter`` on ``handler`` once."""
    if not any(isinstance(f, JobKeysFilter) for f in handler.filters):
        handler.addFilter(JobKeysFilter())
