"""The reaper Lambda: reclaim expired leases, publish queue depth, and wake a worker if none runs.

Handler string ``pail.aws.reaper.handler``, run by an EventBridge schedule
(every minute). Configuration: ``PAIL_BUCKET``, ``PAIL_QUEUE``,
``PAIL_VISIBILITY_TIMEOUT``, ``PAIL_MAX_RETRIES`` as for the workers, plus
``PAIL_WORKER_FUNCTION`` and ``PAIL_SELF_HEAL_AFTER_SECONDS`` for self-heal.

Each run:

1. **Reaps**: ``Pail.reap()`` reads the first page of ``run/`` and, if
   there is more, at most ten pages from where the previous pass stopped
   (kept in the bucket, so a cold container continues the walk too:
   ``pail.protocol.reap_cursor``); expired leases are requeued or
   dead-lettered.
2. **Measures depth** (``pail.depth``): pending, running and dead-lettered
   counts and the oldest pending age, reading at most ten pages of each of
   ``queue/``, ``run/`` and ``dlq/`` (never ``done/``).
3. **Publishes** EMF metrics in namespace ``Pail``, dimension ``queue``:
   ``PendingJobs``, ``RunningJobs``, ``LiveLeases`` (the leases renewed within
   the visibility timeout: jobs a worker runs now), ``DeadLetteredJobs``,
   ``OldestPendingAgeSeconds``, ``ExpiredLeases``, ``SelfHealInvocations``, and
   ``JobsRetried`` / ``JobsDeadLettered`` for the jobs it requeued or
   dead-lettered (so one alarm on ``JobsDeadLettered`` sees workers' and the
   reaper's dead letters alike).
4. **Self-heals** (when ``PAIL_WORKER_FUNCTION`` names the worker Lambda): if
   jobs are pending, no worker holds a live lease (one renewed within the
   visibility timeout: a job waiting out a retry backoff holds none), and the
   oldest pending job has
   waited ``PAIL_SELF_HEAL_AFTER_SECONDS`` (default 60), no worker is running
   and the S3 notification that should have woken one was lost; it invokes
   the worker asynchronously, at most once per that many seconds. The worker
   needs no payload: it drains whatever is pending. A paused queue
   (``pail pause``) is never healed: before it would invoke, the reaper HEADs
   the pause marker (one request, only then).

On an idle queue a run costs five LIST requests (one for the reap, one for the
schedules, three for the depth): about 216,000 a month at one run a minute,
$1.08 at S3 Standard prices, however many schedules there are
(``docs/schedules.md``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pail import config, metrics_names
from pail.aws import observability
from pail.aws.triggers import SELF_HEAL_SOURCE
from pail.depth import DEFAULT_MAX_PAGES, Depth, measure_depth
from pail.errors import ConfigurationError, PailError
from pail.protocol import pause
from pail.protocol.reaper import ReapReport
from pail.queue import Pail

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.metrics import EphemeralMetrics

Invoker = Callable[[str, Mapping[str, Any]], None]
"""Invokes a Lambda function asynchronously: ``invoke(function_name, payload)``."""


def self_heal_reason(depth: Depth, *, after: float) -> str | None:
    """Why a worker should be woken, or None: jobs wait, none runs, and the oldest waited ``after`` s.

    A worker runs while it holds a live lease (``Depth.working``). A lease
    nobody renews (a job waiting out a retry backoff, a dead worker's) is not one.

    >>> self_heal_reason(Depth(pending=3, running=0, dead_lettered=0, oldest_pending_age=90.0), after=60)
    '3 job(s) pending, the oldest for 90 s, and no worker holds a lease'
    >>> self_heal_reason(Depth(pending=3, running=1, dead_lettered=0, oldest_pending_age=90.0), after=60)
    >>> self_heal_reason(Depth(3, running=1, dead_lettered=0, oldest_pending_age=90.0, live=0), after=60)
    '3 job(s) pending, the oldest for 90 s, and no worker holds a lease'
    """
    age = depth.oldest_pending_age
    if depth.pending == 0 or depth.working > 0 or age is None or age < after:
        return None
    return (
        f"{depth.pending} job(s) pending, the oldest for {age:.0f} s, and no worker holds a lease"
    )


class LambdaInvoker:
    """Invokes a function with ``InvocationType=Event`` through a lazily built boto3 client."""

    def __init__(self) -> None:
        self._client: Any = None

    def __call__(self, function_name: str, payload: Mapping[str, Any]) -> None:
        if self._client is None:
            import boto3

            self._client = boto3.client("lambda")
        self._client.invoke(
            FunctionName=function_name,
            InvocationType="Event",
            Payload=json.dumps(payload).encode(),
        )


@dataclass(frozen=True, slots=True)
class _Runtime:
    pail: Pail
    logger: Logger
    metrics: EphemeralMetrics
    worker_function: str | None
    self_heal_after: float
    declared: str | None
    """``PAIL_SCHEDULES``: the schedules the CDK app declares, synced on the first run."""
    declared_limits: str | None = None
    """``PAIL_LIMITS``: the limits the CDK app declares, synced on the first run."""


class ReaperFunction:
    """The reaper Lambda handler ``(event, context) -> summary``; see the module docstring."""

    def __init__(
        self,
        *,
        pail: Pail | Callable[[], Pail] | None = None,
        invoke_worker: Invoker | None = None,
        worker_function: str | None = None,
        self_heal_after: float | None = None,
        depth_pages: int = DEFAULT_MAX_PAGES,
        logger: Logger | None = None,
        metrics: EphemeralMetrics | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pail = pail
        self._invoke = invoke_worker or LambdaInvoker()
        self._worker_function = worker_function
        self._self_heal_after = self_heal_after
        self._depth_pages = depth_pages
        self._logger = logger
        self._metrics = metrics
        self._env = env
        self._clock = clock
        self._runtime: _Runtime | None = None
        self._last_heal: float | None = None
        self._synced = False
        self._limits_synced = False

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        runtime = self._runtime or self._start()
        self._runtime = runtime
        if observability.is_lambda_context(context):
            entry = runtime.logger.inject_lambda_context(self._run, clear_state=True)
            result: dict[str, Any] = entry(event, context)
            return result
        return self._run(event, context)

    def _start(self) -> _Runtime:
        env = os.environ if self._env is None else self._env
        if isinstance(self._pail, Pail):
            pail = self._pail
        elif self._pail is not None:
            pail = self._pail()
        else:
            pail = Pail.from_settings(config.Settings.from_env(env))
        after = config.resolve(
            self._self_heal_after,
            config.ENV_SELF_HEAL_AFTER,
            env,
            default=config.DEFAULT_SELF_HEAL_AFTER,
            parse=config.parse_seconds,
        )
        worker = config.resolve(
            self._worker_function,
            config.ENV_WORKER_FUNCTION,
            env,
            default=None,
            parse=config.parse_text,
        )
        return _Runtime(
            pail=pail,
            logger=self._logger or observability.build_logger(observability.REAPER_SERVICE, env),
            metrics=self._metrics or observability.build_metrics(pail.keys.namespace),
            worker_function=worker or None,
            self_heal_after=after,
            declared=env.get(config.ENV_SCHEDULES),
            declared_limits=env.get(config.ENV_LIMITS),
        )

    def _run(self, event: Any, context: Any) -> dict[str, Any]:
        runtime = self._runtime
        assert runtime is not None
        queue = metrics_names.queue_dimension(runtime.pail.keys.namespace)
        runtime.logger.append_keys(queue=queue)
        failure: PailError | None = None
        with observability.runtime_logs_through(runtime.logger):
            synced = self._sync_schedules(runtime)
            limits_synced = self._sync_limits(runtime)
            try:
                report = runtime.pail.reap()
            except PailError as exc:
                # Depth still goes out, so the alarms keep their data; the run fails after.
                runtime.logger.exception("reaping failed")
                report, failure = ReapReport(complete_pass=False), exc
            depth = measure_depth(
                runtime.pail.store,
                runtime.pail.keys,
                max_pages=self._depth_pages,
                visibility_timeout=runtime.pail.visibility_timeout,
            )
            healed, reason = self._self_heal(runtime, depth)
        self._publish(runtime.metrics, report, depth, healed)
        summary: dict[str, Any] = {
            "queue": queue,
            "reap": {
                "scanned": report.scanned,
                "expired": report.expired,
                "requeued": report.requeued,
                "dead_lettered": report.dead_lettered,
                "cleaned": report.cleaned,
                "renewed": report.renewed,
                "complete_pass": report.complete_pass,
            },
            "schedules": None if report.schedules is None else report.schedules.to_json(),
            "schedules_synced": synced,
            "limits_synced": limits_synced,
            "depth": depth.to_json(),
            "self_heal": {
                "invoked": healed,
                "function": runtime.worker_function,
                "reason": reason,
            },
        }
        runtime.logger.info("reaper run", **summary)
        if failure is not None:
            raise failure
        return summary

    def _sync_schedules(self, runtime: _Runtime) -> dict[str, list[str]] | None:
        """On this container's first run: make the bucket hold the declared schedules.

        A declaration that cannot be read is logged (the reaper still reaps)
        and not tried again: it is the deploy's, and only a deploy changes it.
        A storage error is tried again at the next run.
        """
        if self._synced or runtime.declared is None:
            return None
        from pail.protocol.schedules import registry

        pail = runtime.pail
        try:
            declared = registry.declared(runtime.declared, now=pail.clock.now())
            written, removed = registry.sync(
                pail.store, pail.keys, declared, stats=pail.write_stats
            )
        except ConfigurationError:
            runtime.logger.exception("schedules: the declared schedules are unreadable")
            self._synced = True
            return None
        except PailError:
            runtime.logger.exception("schedules: syncing the declared schedules failed")
            return None
        self._synced = True
        if written or removed:
            runtime.logger.info("schedules: synced", written=written, removed=removed)
        return {"written": written, "removed": removed}

    def _sync_limits(self, runtime: _Runtime) -> bool | None:
        """On this container's first run: make the bucket hold the declared limits (as schedules).

        None when nothing is declared (or it was done); True if written, False if in force.
        """
        if self._limits_synced or runtime.declared_limits is None:
            return None
        from pail.protocol.limits import declared

        pail = runtime.pail
        try:
            written = declared.sync(
                pail.store, pail.keys, runtime.declared_limits, stats=pail.write_stats
            )
        except ConfigurationError:
            runtime.logger.exception("limits: the declared limits are unreadable")
            self._limits_synced = True
            return None
        except PailError:
            runtime.logger.exception("limits: syncing the declared limits failed")
            return None
        self._limits_synced = True
        if written:
            runtime.logger.info("limits: synced the declared limits")
        return written

    def _self_heal(self, runtime: _Runtime, depth: Depth) -> tuple[bool, str | None]:
        if runtime.worker_function is None:
            return False, None
        reason = self_heal_reason(depth, after=runtime.self_heal_after)
        if reason is None:
            return False, None
        if self._paused(runtime):
            return False, f"{reason}; the queue is paused, so no worker is woken"
        now = self._clock()
        if self._last_heal is not None and now - self._last_heal < runtime.self_heal_after:
            return False, f"{reason}; a worker was invoked {now - self._last_heal:.0f} s ago"
        payload = {"source": SELF_HEAL_SOURCE, "detail-type": "pail.self-heal", "reason": reason}
        try:
            self._invoke(runtime.worker_function, payload)
        except Exception as exc:  # logged below; the depth metrics still go out
            runtime.logger.exception(
                "self-heal: could not invoke the worker",
                function=runtime.worker_function,
                error=repr(exc),
            )
            return False, f"{reason}; invoking {runtime.worker_function} failed: {exc}"
        self._last_heal = now
        runtime.logger.warning(
            "self-heal: invoked the worker", function=runtime.worker_function, reason=reason
        )
        return True, reason

    @staticmethod
    def _paused(runtime: _Runtime) -> bool:
        """One HEAD of the pause marker, only when self-heal would wake a worker.

        If it cannot be read, the worker is woken anyway: a woken worker
        looks at the marker itself before it claims.
        """
        try:
            return pause.is_paused(runtime.pail.store, runtime.pail.keys)
        except PailError as exc:
            runtime.logger.warning("self-heal: cannot read the pause marker", error=str(exc))
            return False

    @staticmethod
    def _publish(metrics: EphemeralMetrics, report: ReapReport, depth: Depth, healed: bool) -> None:
        count, seconds = observability.COUNT, observability.SECONDS
        for name, unit, value in (
            (metrics_names.PENDING_JOBS, count, depth.pending),
            (metrics_names.RUNNING_JOBS, count, depth.running),
            (metrics_names.LIVE_LEASES, count, depth.working),
            (metrics_names.DEAD_LETTERED_JOBS, count, depth.dead_lettered),
            (metrics_names.OLDEST_PENDING_AGE_SECONDS, seconds, depth.oldest_pending_age or 0.0),
            (metrics_names.EXPIRED_LEASES, count, report.expired),
            (metrics_names.SELF_HEAL_INVOCATIONS, count, int(healed)),
            (metrics_names.JOBS_RETRIED, count, report.requeued),
            (metrics_names.JOBS_DEAD_LETTERED, count, report.dead_lettered),
        ):
            metrics.add_metric(name=name, unit=unit, value=value)
        metrics.flush_metrics()


_default: ReaperFunction | None = None


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The reaper Lambda's handler (``pail.aws.reaper.handler``), configured from the environment."""
    global _default
    if _default is None:
        _default = ReaperFunction()
    return _default(event, context)
