"""``pail work`` and ``pail work-once``: the worker entry points, shared with the Fargate task.

Both are thin: they resolve options (flag, then ``PAIL_*`` environment
variable, then default, as ``pail.runner`` does), load the handler with
``runner.load_handler`` and hand over to ``runner.run``, which owns the
loop, SIGTERM handling and the exit codes. As the runner promises, the last
line on stdout is the run's summary as JSON.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from pail import config, runner
from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import CommandError
from pail.cli.params import Seconds
from pail.envparse import read_count, read_seconds
from pail.errors import AccessDeniedError, BucketNotFoundError, ConfigurationError, PailError
from pail.output import to_json_text

EXIT_HELP = f"""\b
Exit codes (pail.runner's):
  {runner.EXIT_OK}  ran and stopped normally: jobs processed (each job's outcome is
     recorded on the job), queue empty, a limit reached, or SIGTERM/SIGINT
  {runner.EXIT_ERROR}  S3 kept failing after retries (on a claim, or while recording a
     job's outcome), or an unexpected error
  {runner.EXIT_CONFIG}  configuration: no bucket or handler, a handler that cannot be
     imported, an invalid setting, a missing bucket, denied access"""

_CONFIG_ERRORS = (ConfigurationError, BucketNotFoundError, AccessDeniedError)


def _worker_options[F: Callable[..., Any]](func: F) -> F:
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
            f"back [env {config.ENV_GRACE_PERIOD}; default {runner.DEFAULT_GRACE_PERIOD:g}].",
        ),
        click.option(
            "--job-timeout",
            type=Seconds(above_minimum=True),
            metavar="SECONDS",
            help=f"Fail an attempt whose handler runs longer [env {config.ENV_JOB_TIMEOUT}].",
        ),
    ]
    for decorate in reversed(decorators):
        func = decorate(func)
    return func


def _configure_logging(debug: bool) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
            stream=sys.stderr,
        )
    if debug:
        logging.getLogger("pail").setLevel(logging.DEBUG)


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
    poll_interval: float = 20.0,
    empty_exit_code: int = runner.EXIT_EMPTY,
) -> None:
    opts = options(ctx)
    _configure_logging(opts.debug)
    try:
        spec = handler or os.environ.get(config.ENV_HANDLER, "").strip()
        if not spec:
            raise ConfigurationError(f"no handler: pass --handler or set {config.ENV_HANDLER}")
        function = runner.load_handler(spec)
        pail = opts.connect(resolve_bucket(bucket))
        summary = runner.run(
            pail,
            function,
            once=once,
            max_jobs=max_jobs if max_jobs is not None else read_count(config.ENV_MAX_JOBS),
            time_budget=(
                time_budget if time_budget is not None else read_seconds(config.ENV_TIME_BUDGET)
            ),
            poll_interval=poll_interval,
            grace_period=(
                grace_period
                if grace_period is not None
                else read_seconds(config.ENV_GRACE_PERIOD, default=runner.DEFAULT_GRACE_PERIOD)
                or 0.0
            ),
            job_timeout=(
                job_timeout if job_timeout is not None else read_seconds(config.ENV_JOB_TIMEOUT)
            ),
        )
    except _CONFIG_ERRORS as exc:
        raise CommandError(str(exc), runner.EXIT_CONFIG) from exc
    except PailError as exc:
        raise CommandError(str(exc), runner.EXIT_ERROR) from exc
    out = opts.output()
    if not opts.json:
        unrecorded = f", {summary.unrecorded} not recorded" if summary.unrecorded else ""
        out.note(
            f"processed {summary.processed} job(s): {summary.succeeded} succeeded, "
            f"{summary.failed} failed{unrecorded}; stopped: {summary.stop_reason}"
        )
    if summary.error:
        click.echo(f"pail: S3 kept failing: {summary.error}", err=True)
    out.line(to_json_text(summary.to_json()))
    ctx.exit(runner.exit_code(summary, empty=empty_exit_code))


@click.command(epilog=EXIT_HELP)
@bucket_argument
@_worker_options
@click.option(
    "--poll-interval",
    type=Seconds(minimum=0.1),
    default=20.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait between two claims while the queue is empty.",
)
@global_options
@click.pass_context
def work(
    ctx: click.Context,
    bucket: str | None,
    handler: str | None,
    max_jobs: int | None,
    time_budget: float | None,
    grace_period: float | None,
    job_timeout: float | None,
    poll_interval: float,
) -> None:
    """Run a worker: process jobs with HANDLER until SIGTERM or Ctrl-C.

    The long-running service (an ECS service, a VM, a laptop). On SIGTERM it
    claims nothing more and lets the running job finish within the grace
    period, or gives its lease back so another worker takes it at once.
    """
    _run(
        ctx,
        once=False,
        bucket=bucket,
        handler=handler,
        max_jobs=max_jobs,
        time_budget=time_budget,
        grace_period=grace_period,
        job_timeout=job_timeout,
        poll_interval=poll_interval,
    )


@click.command("work-once", epilog=EXIT_HELP)
@bucket_argument
@_worker_options
@click.option(
    "--empty-exit-code",
    type=click.IntRange(0, 255),
    default=runner.EXIT_EMPTY,
    show_default=True,
    metavar="CODE",
    help="Exit code when the queue was empty, e.g. 3 for `while pail work-once ...; do :; done`.",
)
@global_options
@click.pass_context
def work_once(
    ctx: click.Context,
    bucket: str | None,
    handler: str | None,
    max_jobs: int | None,
    time_budget: float | None,
    grace_period: float | None,
    job_timeout: float | None,
    empty_exit_code: int,
) -> None:
    """Process one job (or up to --max-jobs) with HANDLER, then exit: the Fargate task.

    Stops early when the queue is empty or the time budget is spent.
    """
    _run(
        ctx,
        once=True,
        bucket=bucket,
        handler=handler,
        max_jobs=max_jobs,
        time_budget=time_budget,
        grace_period=grace_period,
        job_timeout=job_timeout,
        empty_exit_code=empty_exit_code,
    )
