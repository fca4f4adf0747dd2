"""Draining a queue: claim a job, run it under supervision, settle it; until told to stop.

This is the only job loop. Every entry point runs jobs through it:
``Pail.work_once`` (one job), ``Pail.work`` (a loop until ``stop``), the
worker Lambda (which stops when the invocation's remaining time runs low) and
the Fargate runner and ``pail work``/``work-once`` (which stop on SIGTERM,
after a number of jobs or a time budget). They differ only in their
``Limits``: when to stop claiming, when a running job should wrap up, and
when its lease must be given back; never in how a job runs. So an ``async
def`` handler, ``current_job()``, ``job_timeout`` and the reporting of an
outcome S3 failed to record work the same under all of them.

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

A job's requests overlap where they need not wait for each other (the
claim's DELETE and HEAD, the lease's removal after the result, the next
candidate's read; ``pail.protocol.overlap``); the drain flushes what is left
in flight before it returns (``flush``).

A handler may be a plain function or an ``async def`` one (run on an event loop
of its own). A handler that raises, hangs past ``job_timeout`` or returns
something that is not JSON fails its attempt (retried, or dead-lettered when no retries are
left) and the loop goes on: one bad job never ends a drain.

**Interrupts** (``KeyboardInterrupt``, ``SystemExit``) are the caller's, not
the job's: a Ctrl-C in the calling thread while a handler runs, or a handler
that raises one (``sys.exit()``), gives the job back unstarted
(``Message.release(started=False)``: pending, its attempt not spent, no
error recorded) and the exception goes on to the caller, after the flush.
That is ``Interrupts.PROPAGATE``, the default, which ``Pail.work_once`` and
``Pail.work`` use. An entry point that is a deployed worker passes
``Interrupts.FAIL``: a handler's interrupt is then that attempt's failure,
recorded like any error, and the loop goes on; the worker Lambda (a
``SystemExit`` would kill its runtime, and a job handed back unspent would
be claimed and kill the next one, forever) and ``pail work``/``work-once``
(a service never dies on one bad job; a real Ctrl-C or SIGTERM reaches it
as a signal, which stops it gracefully) do. An interrupt in the calling
thread always propagates.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import FrameType
from typing import Any, Protocol

from pail import log_keys, tracing
from pail.clock import Clock, SystemClock
from pail.codec import RUNNING, encode_result
from pail.config import DEFAULT_MIN_POLL_INTERVAL, DEFAULT_POLL_INTERVAL
from pail.errors import LeaseLostError, PailError, PayloadError, StorageError
from pail.message import Message
from pail.protocol.dependencies import Flow
from pail.protocol.transitions import Ending
from pail.threads import SYSTEM_THREADS, ThreadFactory

log = logging.getLogger("pail.drain")

TICK = 0.1
"""Seconds between two looks at the limits while a job runs or the worker idles."""

Handler = Callable[[Any], Any]
"""A job function: ``handler(payload) -> result``, plain or ``async def``."""


class HandlerTimeoutError(PailError, TimeoutError):
    """The handler ran longer than ``job_timeout``."""


@dataclass(frozen=True, slots=True)
class Polling:
    """Adaptive idle polling: start at ``floor``, double while the queue stays empty, up to ``ceiling``.

    >>> polling = Polling(0.5, 3)
    >>> polling.next(None), polling.next(0.5), polling.next(2)
    (0.5, 1.0, 3)
    """

    floor: float = DEFAULT_MIN_POLL_INTERVAL
    ceiling: float = DEFAULT_POLL_INTERVAL

    def next(self, current: float | None) -> float:
        if current is None:
            return min(self.floor, self.ceiling)
        return min(current * 2, self.ceiling)


class Interrupts(StrEnum):
    """What a handler's ``KeyboardInterrupt`` or ``SystemExit`` means to a drain (module docstring)."""

    PROPAGATE = "propagate"
    """The caller's: the job goes back unstarted (pending, attempt not spent) and the exception propagates."""
    FAIL = "fail"
    """The job's: the attempt fails with it, recorded, and the drain goes on."""


_INTERRUPTS = (KeyboardInterrupt, SystemExit)


class StopReason(StrEnum):
    """Why a drain ended."""

    EMPTY = "empty"
    """A claim found no job."""
    PAUSED = "paused"
    """The queue is paused (``pail pause``): no job may be claimed until it is resumed."""
    LIMITED = "limited"
    """The queue is at a concurrency or rate limit (``pail limit``): no job may start now."""
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
    """What a drain did: the summary every entry point returns (``pail.runner.RunSummary`` too).

    ``processed == succeeded + failed + unrecorded``; released jobs count as
    failed. ``returned`` jobs were claimed as the drain was stopping and
    handed back before their handler started (not processed, no attempt
    spent); ``unrecorded`` ones ran, but S3 failed before their outcome was
    recorded (the reaper retries them once their lease expires).

    >>> Tally(1, 1, 0, "max_jobs").to_json()["stop_reason"]
    'max_jobs'
    """

    processed: int = 0
    succeeded: int = 0
    failed: int = 0
    stop_reason: StopReason | str | None = None
    """One of ``StopReason``: empty, paused, max_jobs, time_budget, signal, stopped, storage_error."""
    released: int = 0
    retried: int = 0
    dead_lettered: int = 0
    returned: int = 0
    unrecorded: int = 0
    error: PailError | None = None
    """The storage error that stopped the drain (``storage_error``), if any."""

    def __post_init__(self) -> None:
        if self.stop_reason is not None:
            self.stop_reason = StopReason(self.stop_reason)

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
        """The summary as JSON: the last line ``pail work-once`` prints, a Lambda's return value."""
        return {
            "processed": self.processed,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "released": self.released,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "returned": self.returned,
            "unrecorded": self.unrecorded,
            "stop_reason": StopReason(self.stop_reason).value if self.stop_reason else None,
            "error": str(self.error) if self.error else None,
        }


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a running handler can learn about its job through ``current_job()``."""

    message: Message
    stopping: threading.Event
    """Set when the worker must stop soon: finish or checkpoint now, or the job is released."""

    @property
    def dependencies(self) -> Mapping[str, Any]:
        """The results of the jobs this one waited for, by id (``Message.dependencies``)."""
        return self.message.dependencies

    def fan_out(
        self, children: Sequence[Any], *, then: Any, on_failure: str = "dead-letter"
    ) -> Flow:
        """Enqueue ``children`` and a continuation ``then`` after them (``Message.fan_out``)."""
        return self.message.fan_out(children, then=then, on_failure=on_failure)


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


class ProcessLimits:
    """A process's limits: signals, the caller's stop event, and a time budget.

    ``Pail.work`` and the runner (``pail work``/``work-once``, the Fargate
    task) use it. On a signal or ``stop`` it claims nothing more and sets the
    running job's ``stopping`` event; after ``grace_period`` seconds (at once
    on a second signal) the job's lease is released. ``on_signal`` is the
    signal handler: it only sets attributes, since taking a lock in a signal
    handler can deadlock against the interrupted main thread.
    """

    def __init__(
        self,
        *,
        time_budget: float | None,
        grace_period: float,
        stop: threading.Event | None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock or SystemClock().monotonic
        self._started = self._clock()
        self._budget = time_budget
        self._grace = grace_period
        self._stop = stop
        self._stop_seen_at: float | None = None
        self._announced = False
        self.signals = 0
        self.signal_name = ""
        self.signalled_at: float | None = None

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.signal_name = signal.Signals(signum).name
        if self.signalled_at is None:
            self.signalled_at = self._clock()

    def stop_reason(self) -> StopReason | None:
        if self.signals:
            self._announce()
            return StopReason.SIGNAL
        if self._stopped_at() is not None:
            return StopReason.STOPPED
        if self._budget is not None and self._clock() - self._started >= self._budget:
            return StopReason.TIME_BUDGET
        return None

    def wrap_up(self) -> bool:
        if self.signals:
            self._announce()
        return self.signals > 0 or self._stopped_at() is not None

    def _announce(self) -> None:
        # Logged here, in the main loop, not in the signal handler: logging takes locks.
        if not self._announced:
            self._announced = True
            log.info(
                "%s received: claiming no more jobs; a running job has %g s to finish",
                self.signal_name,
                self._grace,
            )

    def release_reason(self) -> str | None:
        if self.signals > 1:
            return f"the worker received {self.signal_name} twice and stopped at once"
        asked = self.signalled_at if self.signalled_at is not None else self._stopped_at()
        if asked is None or self._clock() - asked < self._grace:
            return None
        cause = self.signal_name or "a stop request"
        return (
            f"the worker received {cause} and the job did not finish "
            f"within the {self._grace:g} s grace period"
        )

    def _stopped_at(self) -> float | None:
        if self._stop_seen_at is None and self._stop is not None and self._stop.is_set():
            self._stop_seen_at = self._clock()
        return self._stop_seen_at


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
    clock: Clock | None = None,
    tick: float = TICK,
    paused: Callable[[], bool] | None = None,
    flush: Callable[[], object] | None = None,
    interrupts: Interrupts = Interrupts.PROPAGATE,
    threads: ThreadFactory = SYSTEM_THREADS,
    limited: Callable[[], float | None] | None = None,
) -> Tally:
    """Claim and run jobs until the queue is empty or the limits say stop.

    With ``polling`` the drain does not stop on an empty queue: it waits
    (adaptively, from the floor up to the ceiling) and claims again, and it
    backs off on storage errors the same way. Configuration errors (a missing
    bucket, denied access) always propagate. ``clock`` (default: the system's)
    times the handler (``job_timeout``, durations) and the idle waits.
    ``paused`` (no request: ``Pail.claims_paused``) tells a claim that found
    no job because the queue is paused: the drain then stops with
    ``StopReason.PAUSED``, or, polling, logs it once and idles.
    ``flush`` (``Pail.flush``) is called before the drain returns or raises,
    whatever stopped it: the requests its jobs left in flight (a lease's
    removal after a result, a read ahead) land first, so nothing is in
    flight when a Lambda invocation returns and freezes, or a process exits.
    ``interrupts``: what a handler's ``KeyboardInterrupt`` or ``SystemExit``
    means (``Interrupts``; the module docstring). ``threads`` (``pail.threads``)
    runs each handler and heartbeat; the simulation passes its own.
    ``limited`` (no request: ``Pail.claims_limited_for``) tells a claim that
    found no job because the queue is at a limit, and for how long it stays
    so if known: the drain then stops with ``StopReason.LIMITED``, or,
    polling, waits politely: its usual backoff, never less than that time,
    and the backoff doubles on from the wait.
    """
    try:
        return _drain(
            claim,
            handler,
            limits,
            max_jobs,
            job_timeout,
            polling,
            observer,
            clock,
            tick,
            paused,
            interrupts,
            threads,
            limited,
        )
    finally:
        if flush is not None:
            flush()


def _drain(
    claim: Callable[[], Message | None],
    handler: Handler,
    limits: Limits,
    max_jobs: int | None,
    job_timeout: float | None,
    polling: Polling | None,
    observer: Observer | None,
    clock: Clock | None,
    tick: float,
    paused: Callable[[], bool] | None,
    interrupts: Interrupts,
    threads: ThreadFactory = SYSTEM_THREADS,
    limited: Callable[[], float | None] | None = None,
) -> Tally:
    observer = observer or LoggingObserver()
    clock = clock or SystemClock()
    tally = Tally()
    delay: float | None = None
    announced_pause = False
    while True:
        reason = limits.stop_reason()
        if reason is None and max_jobs is not None and tally.processed >= max_jobs:
            reason = StopReason.MAX_JOBS
        if reason is not None:
            tally.stop_reason = reason
            return tally
        claim_ns = tracing.claim_started()
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
            is_paused = paused is not None and paused()
            held_back = None if limited is None else limited()
            if polling is None:
                tally.stop_reason = (
                    StopReason.PAUSED
                    if is_paused
                    else StopReason.EMPTY
                    if held_back is None
                    else StopReason.LIMITED
                )
                return tally
            if is_paused and not announced_pause:
                log.info("the queue is paused: claiming nothing until it is resumed")
            announced_pause = announced_pause or is_paused
            delay = polling.next(delay)
            if held_back is not None:
                # At a limit, back off as on an empty queue, but never wake before it can
                # admit again (a rate limit's window end): no LIST that can only be refused.
                # The doubling goes on from that wait, so a worker a full queue keeps out
                # looks 1, 2, 4 ... s apart (up to the ceiling), not once a second.
                delay = min(max(delay, held_back), polling.ceiling)
            _idle(delay, limits, clock, tick)
            continue
        delay = None
        if announced_pause:
            log.info("the queue was resumed: claiming again")
            announced_pause = False
        # The claim itself can be slow (S3 throttling, botocore backing off): a
        # job claimed past the point where none may start must not start.
        late = limits.stop_reason()
        tracing.claimed(message.destination, message.id, message.attempt, claim_ns, message.trace)
        with log_keys.about_job(message.id, message.attempt):
            if late is not None:
                report = _release(
                    message, f"claimed too late to start: {late.value}", 0.0, started=False
                )
            else:
                with tracing.processing(
                    message.destination, message.id, message.attempt, message.trace
                ) as attempt:
                    report = _run(
                        message,
                        handler,
                        limits,
                        observer,
                        job_timeout,
                        clock,
                        tick,
                        interrupts,
                        attempt,
                        threads,
                    )
                    attempt.outcome(report.outcome.value, report.error)
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
    clock: Clock,
    tick: float,
    interrupts: Interrupts,
    attempt: tracing.Attempt | None = None,
    threads: ThreadFactory = SYSTEM_THREADS,
) -> JobReport:
    started = False
    try:
        observer.claimed(message)
        started = True
        return supervise(
            handler,
            message,
            limits,
            job_timeout=job_timeout,
            clock=clock,
            tick=tick,
            interrupts=interrupts,
            trace_context=attempt.context() if attempt is not None else None,
            threads=threads,
        )
    except BaseException as exc:
        # Never leave a claimed job behind a heartbeat that outlives the loop.
        if not message.settled:
            if isinstance(exc, _INTERRUPTS):  # Ctrl-C in this thread: the caller's, not the job's
                _release(message, "the worker was interrupted", 0.0, started=False)
            else:
                reason = "the worker failed while supervising the job"
                _release(message, reason, 0.0, started=started)
        raise


def _idle(seconds: float, limits: Limits, clock: Clock, tick: float) -> None:
    # Short naps rather than one long wait: a signal handler may only set a
    # flag (taking a lock there can deadlock), so the flag is polled.
    deadline = clock.monotonic() + seconds
    while limits.stop_reason() is None:
        left = deadline - clock.monotonic()
        if left <= 0:
            return
        clock.sleep(min(tick, left))


def supervise(
    handler: Handler,
    message: Message,
    limits: Limits,
    *,
    job_timeout: float | None = None,
    clock: Clock | None = None,
    tick: float = TICK,
    interrupts: Interrupts = Interrupts.PROPAGATE,
    trace_context: Any = None,
    threads: ThreadFactory = SYSTEM_THREADS,
) -> JobReport:
    """Run ``handler`` on one claimed job and settle it; give the lease back if time runs out.

    A handler's ``KeyboardInterrupt`` or ``SystemExit`` is raised here, its
    job given back unstarted, unless ``interrupts`` is ``Interrupts.FAIL``.
    ``trace_context`` (``pail.tracing.Attempt.context``) is the context the handler runs in.
    The handler runs on a thread ``threads`` starts (``pail.threads``: the simulation's
    are simulated actors, so that this very loop runs under it).
    """
    now = (clock or SystemClock()).monotonic
    job = JobContext(message, threads.event())
    call = _Call(handler, job, now, trace_context, threads)
    started = now()
    try:
        call.start()  # in the try: a handler may interrupt this thread before start() returns
        while not call.finished.wait(tick):
            reason = limits.release_reason()
            if reason is not None:
                job.stopping.set()
                return _release(message, reason, now() - started)
            if limits.wrap_up():
                job.stopping.set()
            if job_timeout is not None and now() - started >= job_timeout:
                job.stopping.set()
                timeout = HandlerTimeoutError(
                    f"handler still running after {job_timeout} s; abandoned"
                )
                return _fail(message, timeout, now() - started)
    except BaseException:
        job.stopping.set()  # an interrupt in this thread: the abandoned handler may stop early
        raise
    error = call.error
    if isinstance(error, _INTERRUPTS) and interrupts is Interrupts.PROPAGATE:
        _release(message, f"the handler raised {_describe(error)}", call.duration, started=False)
        raise error
    return _finish(message, call)


class _Call:
    """The handler, running on one job in a daemon thread of its own."""

    def __init__(
        self,
        handler: Handler,
        job: JobContext,
        clock: Callable[[], float],
        trace_context: Any = None,
        threads: ThreadFactory = SYSTEM_THREADS,
    ) -> None:
        self._trace_context = trace_context
        self._handler = handler
        self._job = job
        self._clock = clock
        self._threads = threads
        self.finished = threads.event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.duration = 0.0

    def start(self) -> None:
        self._threads.start(self._run, f"pail-job-{self._job.message.id}")

    def _run(self) -> None:
        # This thread's context is its own for its whole life: a handler
        # abandoned after a release keeps its job here, never the next one's.
        _current.set(self._job)
        log_keys.set_job(self._job.message.id, self._job.message.attempt)
        # The handler's spans are children of its attempt's (pail.tracing).
        token = tracing.attach(self._trace_context)
        started = self._clock()
        try:
            result = self._handler(self._job.message.payload)
            if inspect.isawaitable(result):  # an `async def` handler: run it on a loop of its own
                import asyncio  # here: most handlers are plain, and asyncio costs a cold start

                result = asyncio.run(_awaited(result))
            self.result = result
        except BaseException as exc:  # noqa: BLE001 - handed to the supervisor, which records it on the job
            self.error = exc
            tracing.record(exc)
        finally:
            self.duration = self._clock() - started
            tracing.detach(token)
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
        with tracing.settling(message.destination, message.id, "complete"):
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
        with tracing.settling(message.destination, message.id, "fail"):
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
        with tracing.settling(message.destination, message.id, "release"):
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
