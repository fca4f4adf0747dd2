"""``pail work`` and ``pail work-once``: the worker's command line, which the Fargate task runs.

Both are thin: they resolve their settings (``config.RunSettings``: flag,
then ``PAIL_*`` environment variable, then default), load the handler with
``runner.load_handler`` and hand over to ``runner.run``, which owns SIGTERM
handling around the one job loop (``pail.drain``). The exit codes are
``exit_codes``' (``EXIT_OK``, ``EXIT_ERROR``, ``EXIT_CONFIG``), and the last
line on stdout is the run's summary as JSON. ``python -m pail.runner``
runs these same commands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import click

from pail import config, runner
from pail.cli import worker_log
from pail.cli.context import Options, bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import (
    EXIT_EMPTY,
    WORKER_HELP,
    CommandError,
    exit_code,
    message_for,
    worker_exit_code_for,
)
from pail.cli.params import Seconds
from pail.cli.worker_log import worker_logging
from pail.drain import Observer, Tally
from pail.emf import EVERY as EMF_EVERY
from pail.emf import EmfReporter, MetricsMode, parse_mode
from pail.errors import ConfigurationError, PailError
from pail.output import to_json_text
from pail.queue import Pail

log = logging.getLogger("pail.work")


def _worker_options[F: Callable[..., Any]](func: F) -> F:
    """The options both worker commands take: one list."""
    decorators = [
        click.option(
            "--handler",
            metavar="MODULE:FUNCTION",
            help=f"The job function, e.g. app.jobs:build_report [env {config.ENV_HANDLER}].",
        ),
        click.option(
            "--max-jobs",
            type=click.IntRange(min=1),
            metavar="N",
            help=f"Stop after N jobs [env {config.ENV_MAX_JOBS}].",
        ),
        click.option(
            "--time-budget",
            type=Seconds(),
            metavar="SECONDS",
            help=f"Claim no job after this long [env {config.ENV_TIME_BUDGET}].",
        ),
        click.option(
            "--grace-period",
            type=Seconds(),
            metavar="SECONDS",
            help="After SIGTERM, how long a running job may go on before its lease is given "
            f"back [env {config.ENV_GRACE_PERIOD}; default {config.DEFAULT_GRACE_PERIOD:g}].",
        ),
        click.option(
            "--job-timeout",
            type=Seconds(above_minimum=True),
            metavar="SECONDS",
            help=f"Fail an attempt whose handler runs longer [env {config.ENV_JOB_TIMEOUT}].",
        ),
        click.option(
            "--reclaim/--no-reclaim",
            default=None,
            help="Recover expired leases from the claims, at most one pass per visibility "
            f"timeout [env {config.ENV_RECLAIM}; default: on]. Off where a scheduled reaper "
            "runs (pail reap --every, the construct's reaper).",
        ),
        click.option(
            "--log-level",
            type=click.Choice(worker_log.LEVELS),
            default=None,
            help="Log level on stderr [default: info; debug with --debug].",
        ),
        click.option(
            "--log-format",
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="Log lines as text, or as one JSON object per line (for log shippers).",
        ),
        click.option(
            "--metrics",
            type=click.Choice([mode.value for mode in MetricsMode]),
            default=None,
            help="CloudWatch EMF metrics as JSON lines on stdout, one record a minute: emf, "
            f"none, or auto (emf inside an ECS task) [env {config.ENV_METRICS}; default auto].",
        ),
        # Tests shorten them; an operator has no reason to.
        click.option("--idle-every", type=click.FloatRange(min=0.05), default=None, hidden=True),
        click.option("--metrics-every", type=click.FloatRange(min=0.05), default=None, hidden=True),
    ]
    for decorate in reversed(decorators):
        func = decorate(func)
    return func


def _start_line(pail: Pail, spec: str, *, once: bool, poll_interval: float) -> None:
    """The first line of a run: where it works and with what, so a log says it at once."""
    queue = pail.keys.root.rstrip("/") or "(default)"
    retries = "none" if pail.max_retries is None else str(pail.max_retries)
    log.info(
        "pail %s: bucket %s, queue %s, handler %s; visibility timeout %g s, max retries %s%s%s",
        "work-once" if once else "work",
        pail.bucket,
        queue,
        spec,
        pail.visibility_timeout,
        retries,
        "" if once else f", polling every {poll_interval:g} s at most when idle",
        (
            f"; reclaiming expired leases every {pail.visibility_timeout:g} s"
            if pail.reclaims
            else "; not reclaiming (a scheduled reaper does)"
        ),
        extra={"bucket": pail.bucket, "queue": queue, "handler": spec},
    )


def _run(
    ctx: click.Context,
    *,
    once: bool,
    bucket: str | None,
    handler: str | None,
    max_jobs: int | None,
    time_budget: float | None,
    grace_period: float | None,
    job_timeout: float | None,
    poll_interval: float = config.DEFAULT_POLL_INTERVAL,
    empty_exit_code: int = EXIT_EMPTY,
    log_level: str | None = None,
    log_format: worker_log.LogFormat = "text",
    idle_every: float | None = None,
    metrics: str | None = None,
    metrics_every: float | None = None,
    reclaim: bool | None = None,
) -> None:
    opts = options(ctx)
    level = log_level or ("debug" if opts.debug else "info")
    with worker_logging(level, log_format):
        summary = _serve(
            opts,
            once=once,
            bucket=bucket,
            handler=handler,
            max_jobs=max_jobs,
            time_budget=time_budget,
            grace_period=grace_period,
            job_timeout=job_timeout,
            poll_interval=poll_interval,
            idle_every=idle_every,
            metrics=metrics,
            metrics_every=metrics_every,
            reclaim=reclaim,
        )
        unrecorded = f", {summary.unrecorded} not recorded" if summary.unrecorded else ""
        log.info(
            "processed %d job(s): %d succeeded, %d failed%s; stopped: %s",
            summary.processed,
            summary.succeeded,
            summary.failed,
            unrecorded,
            summary.stop_reason,
        )
        if summary.error:
            log.error("S3 kept failing: %s", summary.error)
    opts.output().line(to_json_text(summary.to_json()))
    ctx.exit(exit_code(summary, empty=empty_exit_code))


def _serve(
    opts: Options,
    *,
    once: bool,
    bucket: str | None,
    handler: str | None,
    max_jobs: int | None,
    time_budget: float | None,
    grace_period: float | None,
    job_timeout: float | None,
    poll_interval: float,
    idle_every: float | None,
    metrics: str | None,
    metrics_every: float | None,
    reclaim: bool | None = None,
) -> Tally:
    reporter = None
    emf: EmfReporter | None = None
    try:
        settings = config.RunSettings.from_env(
            handler=handler,
            max_jobs=max_jobs,
            time_budget=time_budget,
            grace_period=grace_period,
            job_timeout=job_timeout,
        )
        if not settings.handler:
            raise ConfigurationError(f"no handler: pass --handler or set {config.ENV_HANDLER}")
        function = runner.load_handler(settings.handler)
        pail = opts.connect(resolve_bucket(bucket), reclaim=reclaim)
        _start_line(pail, settings.handler, once=once, poll_interval=poll_interval)
        mode = config.resolve(
            parse_mode(metrics) if metrics else None,
            config.ENV_METRICS,
            None,
            default=MetricsMode.AUTO,
            parse=parse_mode,
        )
        if not once:
            reporter = worker_log.IdleReporter(
                every=idle_every or worker_log.IDLE_EVERY, poll_interval=poll_interval
            ).start()
        observer: Observer | None = reporter
        if mode.resolve(os.environ) is MetricsMode.EMF:
            emf = EmfReporter(
                pail.keys.namespace, every=metrics_every or EMF_EVERY, inner=reporter
            ).start()
            observer = emf
        return runner.run(
            pail,
            function,
            once=once,
            max_jobs=settings.max_jobs,
            time_budget=settings.time_budget,
            poll_interval=poll_interval,
            grace_period=settings.grace_period,
            job_timeout=settings.job_timeout,
            observer=observer,
        )
    except PailError as exc:
        raise CommandError(message_for(exc), worker_exit_code_for(exc)) from exc
    finally:
        if reporter is not None:
            reporter.stop()
        if emf is not None:
            emf.close()  # the last record, before the summary line


@click.command(epilog=WORKER_HELP)
@bucket_argument
@_worker_options
@click.option(
    "--poll-interval",
    type=Seconds(minimum=config.DEFAULT_MIN_POLL_INTERVAL),
    default=config.DEFAULT_POLL_INTERVAL,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait between two claims while the queue is empty.",
)
@global_options
@click.pass_context
def work(ctx: click.Context, /, **options: Any) -> None:
    """Run a worker: process jobs with HANDLER until SIGTERM or Ctrl-C.

    The long-running service (an ECS service, a VM, a laptop). On SIGTERM it
    claims nothing more and lets the running job finish within the grace
    period, or gives its lease back so another worker takes it at once.

    Its log (stderr) starts with the bucket, queue and handler it serves,
    has a line per job, and one a minute while idle. With --metrics emf
    (the default inside an ECS task) stdout gets a CloudWatch EMF record a
    minute: the worker Lambda's metrics, for the construct's alarms.
    """
    _run(ctx, once=False, **options)


@click.command("work-once", epilog=WORKER_HELP)
@bucket_argument
@_worker_options
@click.option(
    "--empty-exit-code",
    type=click.IntRange(0, 255),
    default=EXIT_EMPTY,
    show_default=True,
    metavar="CODE",
    help="Exit code when the queue was empty, e.g. 3 for `while pail work-once ...; do :; done`.",
)
@global_options
@click.pass_context
def work_once(ctx: click.Context, /, **options: Any) -> None:
    """Process one job (or up to --max-jobs) with HANDLER, then exit: the Fargate task.

    Stops early when the queue is empty or the time budget is spent.
    """
    _run(ctx, once=True, **options)
