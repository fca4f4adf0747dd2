"""Draining a queue: claim a job, run it under supervision, settle it; until told to stop.

Both compute entry points share this loop: the worker Lambda (which stops when
the invocation's remaining time runs low) and the Fargate runner (which stops
on SIGTERM, after a number of jobs or a time budget). They differ only in
their ``Limits``: when to stop claiming, when a running job should wrap up,
and when its lease must be given back.

The limits are checked again *after* each claim, before the handler starts:
a claim slowed by S3 can end past the point where no job may start. Such a
job is **returned** (``Message.release(started=False)``): it is claimable at
once, and the attempt is not spent.

The handler runs in a thread of its own so that the loop keeps the clock.
When the limits say a job cannot finish in time, the loop releases the lease
(``Message.release``): the job is claimable again at once instead of waiting
for the lease to expire (never after a retry backoff), and the release is
recorded on the job as its last error; the attempt counts. Python cannot kill
a thread, so the abandoned handler runs on until it returns; whatever it
returns is discarded, and its log lines keep its own job's keys
(``pail.log_keys``). A handler that wants to stop cleanly can watch
``current_job().stopping``.

If S3 fails while an outcome is recorded (after botocore's retries), the
drain stops with ``StopReason.STORAGE_ERROR`` and the error, unless it polls
(a long-running service, which logs it and goes on): the job's lease expires
and the reaper retries it.

A handler may be a plain function or an ``async def`` one (run on an event loop
of its own). A handler that raises, hangs past ``job_timeout`` or returns
something that is not JSON fails its attempt (retried, or dead-lettered when no retries are
left) and the loop goes on: one bad job never ends a drain.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from pail import log_keys
from pail.codec import RUNNING, encode_result
from pail.errors import LeaseLostError, PailError, PayloadError, StorageError
from pail.message import Message
from pail.protocol.transitions import Ending
from pail.worker import Handler, HandlerTimeoutError, Polling

log = logging.getLogger("pail.drain")

TICK = 0.1
"""Seconds between two looks at the limits while a job runs or the worker idles."""


class StopReason(StrEnum):
    """Why a drain ended."""

    EMPTY = "empty"
    """A claim found no job."""
    MAX_JOBS = "max_jobs"
    """The number of jobs asked for was processed."""
    TIME_BUDGET = "time_budget"
    """Too little time was left to start another job (a Lambda's remaining time, a runner's budget)."""
    SIGNAL = "signal"
    """SIGTERM or SIGINT arrived."""
    STOPPED = "stopped"
    """The caller's stop event was set."""
    STORAGE_ERROR = "storage_error"
    """A claim failed on a storage error (after botocore's retries)."""


class Outcome(StrEnum):
    """How one attempt at a job ended, from this worker's side."""

    SUCCEEDED = "succeeded"
    """The handler's result is recorded."""
    FAILED = "failed"
    """The failure is recorded: the job is retried or dead-lettered."""
    RELEASED = "released"
    """The handler ran out of time and the job went back to the queue; the attempt counts."""
    RETURNED = "returned"
    """Claimed too late to start: the job went back untouched, its handler never ran."""
    UNRECORDED = "unrecorded"
    """The handler ended but S3 failed before its outcome was recorded; the reaper retries it."""


@dataclass(frozen=True, slots=True)
class JobReport:
    """What happened to one claimed job."""

    job_id: str
    attempt: int
    outcome: Outcome
    duration: float
    """Seconds from the handler's start to its end (or to the release or time-out)."""
    ending: Ending | None = None
    """For a failed or released attempt: requeued or dead-lettered; None if the lease was lost."""
    error: str | None = None
    storage_error: PailError | None = None
    """The S3 failure that stopped this outcome being recorded (in full), if any."""

    @property
    def retried(self) -> bool:
        return self.ending is Ending.REQUEUED

    @property
    def dead_lettered(self) -> bool:
        return self.ending is Ending.DEAD_LETTERED


@dataclass
class Tally:
    """Counts over one drain.

    ``processed == succeeded + failed + unrecorded``; released jobs count as
    failed. Returned jobs (claimed too late, never started) are not processed.
    """

    processed: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    released: int = 0
    returned: int = 0
    unrecorded: int = 0
    stop_reason: StopReason | None = None
    error: PailError | None = None

    def add(self, report: JobReport) -> None:
        if report.outcome is Outcome.RETURNED:
            self.returned += 1
            return
        self.processed += 1
        if report.outcome is Outcome.SUCCEEDED:
            self.succeeded += 1
        elif report.outcome is Outcome.UNRECORDED:
            self.unrecorded += 1
        else:
            self.failed += 1
            self.released += report.outcome is Outcome.RELEASED
            self.retried += report.retried
            self.dead_lettered += report.dead_lettered

    def to_json(self) -> dict[str, Any]:
        return {
            "processed": self.processed,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "released": self.released,
            "returned": self.returned,
            "unrecorded": self.unrecorded,
            "stop_reason": self.stop_reason.value if self.stop_reason else None,
            "error": str(self.error) if self.error else None,
        }


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a running handler can learn about its job through ``current_job()``."""

    message: Message
    stopping: threading.Event
    """Set when the worker must stop soon: finish or checkpoint now, or the job is released."""


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "pail_current_job", default=None
)


def current_job() -> JobContext | None:
    """The job the calling handler runs, or None outside a supervised job.

    A long handler can report progress and stop cooperatively::

        def run(payload):
            job = current_job()
            for step in steps(payload):
                if job and job.stopping.is_set():
                    raise RuntimeError("stopping: the job will be retried")
                step()
                if job:
                    job.message.progress({"done": step.number})
    """
    return _current.get()


class Limits(Protocol):
    """When a drain stops claiming, and when a running job must be given back."""

    def stop_reason(self) -> StopReason | None:
        """Why no further job may be claimed now; None to go on."""
        ...

    def wrap_up(self) -> bool:
        """True once a running job should finish quickly (its ``stopping`` event is set)."""
        ...

    def release_reason(self) -> str | None:
        """Why the running job must give its lease back now; None while it may run on."""
        ...


class Observer(Protocol):
    """Hooks around each job, for logging, metrics and tracing."""

    def claimed(self, message: Message) -> None: ...

    def settled(self, report: JobReport) -> None: ...


class LoggingObserver:
    """Logs each job's start and end on the ``pail.drain`` logger."""

    def claimed(self, message: Message) -> None:
        log.info("job %s attempt %d started", message.id, message.attempt)

    def settled(self, report: JobReport) -> None:
        level = logging.WARNING
        if report.outcome in (Outcome.SUCCEEDED, Outcome.RETURNED):
            level = logging.INFO
        detail = f": {report.error}" if report.error else ""
        ending = f", {report.ending.value}" if report.ending else ""
        log.log(
            level,
            "job %s attempt %d %s in %.3f s%s%s",
            report.job_id,
            report.attempt,
            report.outcome.value,
            report.duration,
            ending,
            detail,
        )


def drain(
    claim: Callable[[], Message | None],
    handler: Handler,
    limits: Limits,
    *,
    max_jobs: int | None = None,
    job_timeout: float | None = None,
    polling: Polling | None = None,
    observer: Observer | None = None,
    clock: Callable[[], float] = time.monotonic,
    tick: float = TICK,
) -> Tally:
    """Claim and run jobs until the queue is empty or the limits say stop.

    With ``polling`` the drain does not stop on an empty queue: it waits
    (adaptively, from the floor up to the ceiling) and claims again, and it
    backs off on storage errors the same way. Configuration errors (a missing
    bucket, denied access) always propagate.
    """
    observer = observer or LoggingObserver()
    tally = Tally()
    delay: float | None = None
    while True:
        reason = limits.stop_reason()
        if reason is None and max_jobs is not None and tally.processed >= max_jobs:
            reason = StopReason.MAX_JOBS
        if reason is not None:
            tally.stop_reason = reason
            return tally
        try:
            message = claim()
        except StorageError as exc:
            if polling is None:
                log.error("claim failed: %s", exc)
                tally.stop_reason, tally.error = StopReason.STORAGE_ERROR, exc
                return tally
            log.warning("claim failed, backing off: %s", exc)
            message = None
        if message is None:
            if polling is None:
                tally.stop_reason = StopReason.EMPTY
                return tally
            delay = polling.next(delay)
            _idle(delay, limits, clock, tick)
            continue
        delay = None
        # The claim itself can be slow (S3 throttling, botocore backing off): a
        # job claimed past the point where none may start must not start.
        late = limits.stop_reason()
        with log_keys.about_job(message.id, message.attempt):
            if late is not None:
                report = _release(
                    message, f"claimed too late to start: {late.value}", 0.0, started=False
                )
            else:
                report = _run(message, handler, limits, observer, job_timeout, clock, tick)
            tally.add(report)
            observer.settled(report)
        if report.storage_error is not None and polling is None:
            # S3 failed while recording an outcome: say so (exit code 1, a failed
            # invocation) rather than claim more work from a store that fails.
            tally.stop_reason, tally.error = StopReason.STORAGE_ERROR, report.storage_error
            return tally
        if late is not None:
            tally.stop_reason = late
            return tally
        if report.storage_error is not None:
            log.warning("job %s: outcome not fully recorded; serving on", report.job_id)


def _run(
    message: Message,
    handler: Handler,
    limits: Limits,
    observer: Observer,
    job_timeout: float | None,
    clock: Callable[[], float],
    tick: float,
) -> JobReport:
    started = False
    try:
        observer.claimed(message)
        started = True
        return supervise(handler, message, limits, job_timeout=job_timeout, clock=clock, tick=tick)
    except BaseException:
        # Never leave a claimed job behind a heartbeat that outlives the loop.
        if not message.settled:
            _release(message, "the worker failed while supervising the job", 0.0, started=started)
        raise


def _idle(seconds: float, limits: Limits, clock: Callable[[], float], tick: float) -> None:
    # Short naps rather than one long wait: a signal handler may only set a
    # flag (taking a lock there can deadlock), so the flag is polled.
    deadline = clock() + seconds
    while limits.stop_reason() is None:
        left = deadline - clock()
        if left <= 0:
            return
        time.sleep(min(tick, left))


def supervise(
    handler: Handler,
    message: Message,
    limits: Limits,
    *,
    job_timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    tick: float = TICK,
) -> JobReport:
    """Run ``handler`` on one claimed job and settle it; give the lease back if time runs out."""
    job = JobContext(message, threading.Event())
    call = _Call(handler, job, clock)
    started = clock()
    call.start()
    while not call.finished.wait(tick):
        reason = limits.release_reason()
        if reason is not None:
            job.stopping.set()
            return _release(message, reason, clock() - started)
        if limits.wrap_up():
            job.stopping.set()
        if job_timeout is not None and clock() - started >= job_timeout:
            job.stopping.set()
            timeout = HandlerTimeoutError(f"handler still running after {job_timeout} s; abandoned")
            return _fail(message, timeout, clock() - started)
    return _finish(message, call)


class _Call:
    """The handler, running on one job in a daemon thread of its own."""

    def __init__(self, handler: Handler, job: JobContext, clock: Callable[[], float]) -> None:
        self._handler = handler
        self._job = job
        self._clock = clock
        self.finished = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.duration = 0.0
        self._thread = threading.Thread(
            target=self._run, name=f"pail-job-{job.message.id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # This thread's context is its own for its whole life: a handler
        # abandoned after a release keeps its job here, never the next one's.
        _current.set(self._job)
        log_keys.set_job(self._job.message.id, self._job.message.attempt)
        started = self._clock()
        try:
            result = self._handler(self._job.message.payload)
            if inspect.isawaitable(result):  # an `async def` handler: run it on a loop of its own
                result = asyncio.run(_awaited(result))
            self.result = result
        except BaseException as exc:  # noqa: BLE001 - handed to the supervisor, which records it on the job
            self.error = exc
        finally:
            self.duration = self._clock() - started
            self.finished.set()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _finish(message: Message, call: _Call) -> JobReport:
    if call.error is not None:
        return _fail(message, call.error, call.duration)
    if message.lease_lost:
        lost = LeaseLostError("the lease was lost while the handler ran; its result is dropped")
        return _fail(message, lost, call.duration)
    try:
        encode_result(call.result)
    except PayloadError as exc:
        return _fail(message, exc, call.duration)
    try:
        recorded = message.complete(call.result)
    except PailError as exc:
        # The heartbeat has stopped: the lease expires and the reaper retries the job.
        log.error("job %s: could not record its result: %s", message.id, exc)
        error = f"result not recorded (S3 failed): {exc}"
        return _report(message, Outcome.UNRECORDED, call.duration, None, error, exc)
    if not recorded:
        error = "result not recorded: the lease was lost or the job had already finished"
        return _report(message, Outcome.FAILED, call.duration, None, error)
    return _report(message, Outcome.SUCCEEDED, call.duration, None, None)


def _fail(message: Message, error: BaseException, duration: float) -> JobReport:
    described = _describe(error)
    try:
        ending = message.fail(error)
    except PailError as exc:
        log.error(
            "job %s: could not record its failure (%s); the reaper retries it when its lease expires",
            message.id,
            exc,
        )
        if not _decided(message):
            return _report(message, Outcome.UNRECORDED, duration, None, described, exc)
        return _report(message, Outcome.FAILED, duration, None, described, exc)
    return _report(message, Outcome.FAILED, duration, ending, described)


def _release(message: Message, reason: str, duration: float, *, started: bool = True) -> JobReport:
    outcome = Outcome.RELEASED if started else Outcome.RETURNED
    try:
        ending = message.release(reason, started=started)
    except PailError as exc:
        log.error(
            "job %s: could not release its lease (%s); the reaper retries it when the lease expires",
            message.id,
            exc,
        )
        if started and not _decided(message):
            outcome = Outcome.UNRECORDED
        return _report(message, outcome, duration, None, reason, exc)
    return _report(message, outcome, duration, ending, reason)


def _decided(message: Message) -> bool:
    """True once the lease records the owner's decision (retry or dead-letter): the reaper finishes it."""
    return message.lease.record.state != RUNNING


def _report(
    message: Message,
    outcome: Outcome,
    duration: float,
    ending: Ending | None,
    error: str | None,
    storage_error: PailError | None = None,
) -> JobReport:
    return JobReport(message.id, message.attempt, outcome, duration, ending, error, storage_error)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
