"""The worker Lambda: one line turns a job function into a handler that drains the queue.

::

    # reports.py, deployed with the Lambda handler "reports.handler"
    from pail import lambda_worker

    def run(payload: dict) -> dict | None:
        return {"url": build_report(payload["report_id"])}

    handler = lambda_worker(run)

**Configuration** comes from the environment (names in ``pail.config``):
``PAIL_BUCKET`` (required), ``PAIL_QUEUE``, ``PAIL_VISIBILITY_TIMEOUT``,
``PAIL_MAX_RETRIES``, ``PAIL_SAFETY_MARGIN_SECONDS`` (default 10),
``PAIL_JOB_TIMEOUT_SECONDS``, ``PAIL_MAX_JOBS``, ``PAIL_TRACING``; keyword
arguments to ``lambda_worker`` win over them.

**The job its event names, first.** An S3 event names the entry it
announces (``pail.aws.triggers``); the worker claims that entry first, with
no listing (``pail.aws.named``): an invocation whose job another one already
ran returns after that one GET. Only one that won its job goes on to list
and drain; a schedule, the reaper's self-heal or a direct invoke, which name
no job, list from the start.

**One invocation drains.** It claims
and runs jobs one after another until a claim finds none, or until the
invocation's remaining time (``context.get_remaining_time_in_millis()``)
falls below the safety margin: no job is started with less than the margin
left. The margin is checked before each claim and again after it, before the
handler starts: a job whose claim ended inside the margin is returned to the
queue untouched (its attempt is not spent). A job still running when the
remaining time falls to half the margin (``release_reserve``) gets its lease
released: the job is claimable again at once (never after a retry backoff),
and its status records the release (error type ``LeaseReleased``). That
attempt counts, so a job that never fits dead-letters instead of cycling.

**It returns** a summary: ``processed``, ``succeeded``, ``failed``,
``retried``, ``dead_lettered``, ``released``, ``returned``, ``unrecorded``,
``stop_reason`` (``empty``, ``paused``, ``limited``, ``time_budget``, ``max_jobs``,
``storage_error``; ``paused``: the queue is paused, ``pail pause``, and it returned without
claiming; ``limited``: every slot of the queue's concurrency limit was taken, or its rate's
window was full, found with at most 2 requests before any claim, ``pail limit``),
``trigger`` and ``queue`` (plus an empty ``batchItemFailures`` for SQS, so no
message is redelivered: the event only woke the worker). If S3 fails on a
claim or while an outcome is recorded, the invocation raises instead, after
publishing its metrics, so Lambda's retry and ``Errors`` metric see it.

**At a limit** (``pail limit``, ``docs/limits.md``): an invocation for a
queue whose construct declares limits (``PAIL_LIMITS``), or by a warm
container that has seen limits, first reads them and lists the queue's
slots (or its rate's window): at most 2 requests. With every slot taken it
returns ``stop_reason: "limited"`` having claimed nothing.

**Observability** (Powertools, see ``pail.aws.observability``): every log line
carries ``queue``, and a line logged by a job's handler thread, or about a
job, carries its ``job_id`` and ``attempt`` (per thread: ``pail.log_keys``);
the metrics ``JobsProcessed``, ``JobsFailed``, ``JobsRetried``,
``JobsDeadLettered``, ``JobsReleased``, ``JobsReturned`` and ``JobDuration`` go
out as EMF at the end of each invocation. Powertools is imported on the first invocation, not
here, so a module that defines ``handler = lambda_worker(run)`` also imports
where Powertools is not installed (a Fargate image running ``run``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pail import config, log_keys, metrics_names
from pail.aws.named import NamedFirst
from pail.aws.triggers import LOGGED_KEYS, SQS, describe_trigger
from pail.drain import Interrupts, JobReport, Outcome, StopReason, Tally, drain
from pail.errors import ConfigurationError, StorageError
from pail.message import Message
from pail.queue import Pail

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Tracer
    from aws_lambda_powertools.metrics import EphemeralMetrics

Run = Callable[[Any], Any]
LambdaHandler = Callable[[Any, Any], dict[str, Any]]


class InvocationLimits:
    """The drain limits of one invocation, read from the Lambda context's remaining time.

    Without a context (a local call) there is no deadline: it drains until empty.
    """

    def __init__(self, context: Any, margin: float, reserve: float) -> None:
        self._remaining: Callable[[], int] | None = getattr(
            context, "get_remaining_time_in_millis", None
        )
        self.margin = margin
        self.reserve = reserve

    def remaining(self) -> float | None:
        """Seconds left in the invocation, or None without a context."""
        return None if self._remaining is None else self._remaining() / 1000

    def stop_reason(self) -> StopReason | None:
        left = self.remaining()
        return StopReason.TIME_BUDGET if left is not None and left < self.margin else None

    def wrap_up(self) -> bool:
        return self.stop_reason() is not None

    def release_reason(self) -> str | None:
        left = self.remaining()
        if left is None or left > self.reserve:
            return None
        return (
            f"the Lambda invocation had {left:.1f} s left, within the {self.reserve:g} s "
            "kept to hand the job back"
        )


@dataclass(frozen=True, slots=True)
class _Runtime:
    """Everything built on the first invocation and kept for the container's life."""

    pail: Pail
    logger: Logger
    metrics: EphemeralMetrics
    tracer: Tracer | None
    margin: float
    reserve: float
    job_timeout: float | None
    max_jobs: int | None
    look_first: bool = False
    """``PAIL_LIMITS`` is set (the construct declares limits): look at them before any claim."""


class LambdaWorker:
    """A Lambda handler ``(event, context) -> summary`` that drains the queue with ``run``.

    ``handler = lambda_worker(run)`` (``lambda_worker`` is this class); see the module docstring.

    Every keyword is optional and beats its environment variable:

    * ``pail``: the queue, or a function that makes it (default: from ``PAIL_*``);
    * ``safety_margin``: seconds; no job is claimed with less left (``PAIL_SAFETY_MARGIN_SECONDS``, 10);
    * ``release_reserve``: seconds; a job still running with this little left is released
      (default: half the margin);
    * ``job_timeout``: seconds; a handler running longer fails its attempt (``PAIL_JOB_TIMEOUT_SECONDS``);
    * ``max_jobs``: at most this many jobs per invocation (``PAIL_MAX_JOBS``);
    * ``logger``, ``metrics``, ``tracer``: Powertools objects to use instead of pail's own;
    * ``env``: the environment to read instead of ``os.environ``.

    Nothing is read or connected until the first invocation.
    """

    def __init__(
        self,
        run: Run,
        *,
        pail: Pail | Callable[[], Pail] | None = None,
        safety_margin: float | None = None,
        release_reserve: float | None = None,
        job_timeout: float | None = None,
        max_jobs: int | None = None,
        logger: Logger | None = None,
        metrics: EphemeralMetrics | None = None,
        tracer: Tracer | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not callable(run):
            raise ConfigurationError(f"lambda_worker needs a function, got {run!r}")
        self.__pail_run__ = run
        self.__name__ = getattr(run, "__name__", "handler")
        self.__doc__ = getattr(run, "__doc__", None)
        self._pail = pail
        self._margin = safety_margin
        self._reserve = release_reserve
        self._job_timeout = job_timeout
        self._max_jobs = max_jobs
        self._logger = logger
        self._metrics = metrics
        self._tracer = tracer
        self._env = env
        self._entry: LambdaHandler | None = None

    @property
    def run(self) -> Run:
        """The job function this handler wraps."""
        return self.__pail_run__

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        if self._entry is None:
            self._entry = self._wrap(self._start())
        return self._entry(event, context)

    # -- set-up, once per container ---------------------------------------------

    def _start(self) -> _Runtime:
        from pail.aws import observability

        env = os.environ if self._env is None else self._env
        pail = self._connect(env)
        settings = config.RunSettings.from_env(
            env,
            safety_margin=self._margin,
            job_timeout=self._job_timeout,
            max_jobs=self._max_jobs,
        )
        margin = settings.safety_margin
        reserve = margin / 2 if self._reserve is None else self._reserve
        if not 0 < reserve <= margin:
            raise ConfigurationError(
                f"release_reserve must be > 0 and <= the safety margin ({margin} s), got {reserve}"
            )
        service = observability.WORKER_SERVICE
        logger = self._logger or observability.build_logger(service, env)
        log_keys.install(logger.registered_handler)
        return _Runtime(
            pail=pail,
            logger=logger,
            metrics=self._metrics or observability.build_metrics(pail.keys.namespace),
            tracer=self._tracer or observability.build_tracer(service, env),
            margin=margin,
            reserve=reserve,
            job_timeout=settings.job_timeout,
            max_jobs=settings.max_jobs,
            look_first=bool(env.get(config.ENV_LIMITS)),
        )

    def _connect(self, env: Mapping[str, str]) -> Pail:
        if isinstance(self._pail, Pail):
            return self._pail
        if self._pail is not None:
            return self._pail()
        return Pail.from_settings(config.Settings.from_env(env))

    def _wrap(self, runtime: _Runtime) -> LambdaHandler:
        from pail.aws.observability import is_lambda_context

        def entry(event: Any, context: Any) -> dict[str, Any]:
            return self._invoke(runtime, event, context)

        wrapped: LambdaHandler = entry
        if runtime.tracer is not None:
            wrapped = runtime.tracer.capture_lambda_handler(wrapped, capture_response=False)
        injected: LambdaHandler = runtime.logger.inject_lambda_context(wrapped, clear_state=True)

        def dispatch(event: Any, context: Any) -> dict[str, Any]:
            # A local call has no Lambda context for Powertools to read.
            return injected(event, context) if is_lambda_context(context) else entry(event, context)

        return dispatch

    # -- one invocation ----------------------------------------------------------

    def _invoke(self, runtime: _Runtime, event: Any, context: Any) -> dict[str, Any]:
        from pail.aws.observability import runtime_logs_through

        trigger = describe_trigger(event)
        queue = metrics_names.queue_dimension(runtime.pail.keys.namespace)
        limits = InvocationLimits(context, runtime.margin, runtime.reserve)
        runtime.logger.append_keys(queue=queue)
        runtime.logger.info(
            "worker invoked",
            trigger=trigger.kind,
            notified_keys=list(trigger.keys[:LOGGED_KEYS]),
            remaining_seconds=limits.remaining(),
        )
        observer = _Observer(runtime.logger, runtime.tracer)
        claims = NamedFirst(runtime.pail, trigger.keys)
        held_back = None
        if runtime.look_first or runtime.pail.knows_limits:
            try:
                held_back = runtime.pail.limited_now()
            except StorageError as exc:  # the drain's claim meets it too, and decides
                runtime.logger.warning("could not read the queue's limits: %s", exc)
        if held_back is not None:
            # Every slot is taken (or the rate's window is full): return at once, having
            # read the limits and listed once, rather than claim only to be refused.
            tally = Tally(stop_reason=StopReason.LIMITED)
            runtime.logger.info("worker finished: the queue is at its limit", seconds=held_back)
            summary = {**tally.to_json(), "trigger": trigger.kind, "queue": queue}
            if trigger.kind == SQS:
                summary["batchItemFailures"] = []
            return summary
        try:
            with runtime_logs_through(runtime.logger):
                tally = drain(
                    claims,
                    self.run,
                    limits,
                    max_jobs=runtime.max_jobs,
                    job_timeout=runtime.job_timeout,
                    observer=observer,
                    clock=runtime.pail.clock,
                    paused=lambda: runtime.pail.claims_paused,
                    flush=runtime.pail.flush,
                    # A handler's SystemExit would end the runtime, and the job,
                    # handed back unspent, would end the next one: it is the job's failure.
                    interrupts=Interrupts.FAIL,
                )
        finally:
            observer.publish(runtime.metrics)
        summary = {**tally.to_json(), "trigger": trigger.kind, "queue": queue}
        if trigger.kind == SQS:
            summary["batchItemFailures"] = []
        runtime.logger.info("worker finished", **tally.to_json(), named=dict(claims.found))
        if tally.error is not None:
            # S3 kept failing (on a claim, or while recording an outcome): fail the
            # invocation so that it shows in Errors and Lambda retries it.
            raise tally.error
        return summary


lambda_worker = LambdaWorker
"""``handler = lambda_worker(run)``: the worker Lambda template (``LambdaWorker``, by its usual name)."""


class _Observer:
    """Per-job log keys, log lines, a trace subsegment, and the counts for the metrics."""

    def __init__(self, logger: Logger, tracer: Tracer | None) -> None:
        self._logger = logger
        self._tracer = tracer
        self._span = ExitStack()
        self.tally = Tally()
        self.durations_ms: list[float] = []

    def claimed(self, message: Message) -> None:
        # job_id and attempt come from pail.log_keys, per thread: never appended
        # to the logger, where an abandoned handler's late lines would pick up
        # the next job's keys.
        if self._tracer is not None:
            segment = self._span.enter_context(self._tracer.provider.in_subsegment("## pail job"))
            segment.put_annotation("job_id", message.id)
            segment.put_annotation("attempt", str(message.attempt))
        self._logger.info("job started")

    def settled(self, report: JobReport) -> None:
        self.tally.add(report)
        if report.outcome is not Outcome.RETURNED:
            self.durations_ms.append(report.duration * 1000)
        fields: dict[str, Any] = {
            "outcome": report.outcome.value,
            "duration_ms": round(report.duration * 1000, 1),
        }
        if report.ending is not None:
            fields["ending"] = report.ending.value
        if report.error is not None:
            fields["error"] = report.error
        if report.outcome is Outcome.SUCCEEDED:
            self._logger.info("job succeeded", **fields)
        elif report.outcome is Outcome.RETURNED and report.storage_error is None:
            self._logger.info("job returned unstarted", **fields)
        else:
            self._logger.warning(f"job {report.outcome.value}", **fields)
        self._span.close()

    def publish(self, metrics: EphemeralMetrics) -> None:
        from pail.aws.observability import COUNT, MILLISECONDS

        tally = self.tally
        # Durations first: Powertools prints a record by itself at 100 values
        # of one metric, and the counters after them keep the last flush non-empty.
        for duration in self.durations_ms:
            metrics.add_metric(name=metrics_names.JOB_DURATION, unit=MILLISECONDS, value=duration)
        # Counters go out every invocation, zeros included, so alarms and
        # dashboards see a value rather than missing data.
        for name, value in (
            (metrics_names.JOBS_PROCESSED, tally.processed),
            (metrics_names.JOBS_FAILED, tally.failed),
            (metrics_names.JOBS_RETRIED, tally.retried),
            (metrics_names.JOBS_DEAD_LETTERED, tally.dead_lettered),
            (metrics_names.JOBS_RELEASED, tally.released),
            (metrics_names.JOBS_RETURNED, tally.returned),
        ):
            metrics.add_metric(name=name, unit=COUNT, value=value)
        metrics.flush_metrics()
