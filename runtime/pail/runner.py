"""The Fargate and command-line runner: ``work-once`` (a task per burst) and ``work`` (a service).

``run`` drains a queue with a plain function ``handler(payload)``:

* ``once=True`` (``work-once``): claim and run jobs until the queue is empty,
  ``max_jobs`` were processed (default 1) or ``time_budget`` seconds have
  passed, then return. A task started per S3 event uses this.
* ``once=False`` (``work``): a long-running service. An empty queue is
  polled adaptively, from 0.1 s up to ``poll_interval``.

Both stop cleanly on SIGTERM (what ECS sends before it stops a task) and
SIGINT: they claim nothing more, let the running job finish within
``grace_period`` seconds, and otherwise give its lease back
(``Message.release``) so another worker can claim it at once. A second
signal releases the job without waiting for the rest of the grace period.
A job whose claim was still in flight when the signal came is handed back
before its handler starts, its attempt not spent (``returned``).
The time budget only bounds claiming: a job started inside it runs to its
end (bounded by ``job_timeout`` if set).

Exit codes of ``main_work_once`` and ``main_work`` (``python -m pail.runner``):

====  ==========================================================================
0     ``EXIT_OK``: it ran and stopped normally: jobs processed (whatever their
      outcome, which is recorded on each job), the queue was empty
      (``EXIT_EMPTY``, unless ``--empty-exit-code`` says otherwise), a job
      count or time budget was reached, or a signal stopped it cleanly.
1     ``EXIT_ERROR``: S3 kept failing (after botocore's retries) on a claim
      or while a job's outcome was recorded (``work-once``; the summary's
      ``error`` says which), or an unexpected error.
2     ``EXIT_CONFIG``: bad configuration: no bucket, a handler that cannot be
      imported or called, an invalid setting, a missing bucket, denied access.
====  ==========================================================================

The last line on stdout is the run's summary as JSON, for scripts and logs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pail import config
from pail.drain import Handler, Observer, Polling, ProcessLimits, StopReason, Tally, drain
from pail.envparse import parse_seconds, read_count, read_seconds
from pail.errors import AccessDeniedError, BucketNotFoundError, ConfigurationError, PailError
from pail.queue import Pail

log = logging.getLogger("pail.runner")

EXIT_OK = 0
EXIT_EMPTY = 0
"""``work-once`` found no job. Zero, so a task started for an event that another
worker already served does not count as a failed task; ``--empty-exit-code``
picks another code (e.g. for ``while pail work-once --empty-exit-code 3; do :; done``)."""
EXIT_ERROR = 1
EXIT_CONFIG = 2

DEFAULT_GRACE_PERIOD = 25.0
"""Seconds a running job may go on after SIGTERM. ECS waits 30 s (``stopTimeout``)
before SIGKILL; the rest is kept for giving the lease back."""

_CONFIG_ERRORS = (ConfigurationError, BucketNotFoundError, AccessDeniedError)
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


RunSummary = Tally
"""What a run did: ``pail.drain.Tally``, the one summary every entry point returns."""


def exit_code(summary: RunSummary, *, empty: int = EXIT_EMPTY) -> int:
    """The process exit code for a run that ended with ``summary`` (see the module docstring).

    >>> exit_code(RunSummary(0, 0, 0, "empty"), empty=3), exit_code(RunSummary(1, 0, 1, "max_jobs"))
    (3, 0)
    """
    if summary.stop_reason == StopReason.STORAGE_ERROR:
        return EXIT_ERROR
    if summary.processed == 0 and summary.stop_reason == StopReason.EMPTY:
        return empty
    return EXIT_OK


# -- the handler -----------------------------------------------------------------


def load_handler(spec: str) -> Callable[[Any], Any]:
    """Import the handler named by ``spec``: ``"package.module:function"``.

    ``"package.module.function"`` (the Lambda style) works too. The current
    directory is importable, as with ``python -m``. A worker Lambda handler
    made with ``pail.lambda_worker(run)`` is unwrapped to its ``run``, so one
    module serves both Lambda and Fargate.

    >>> load_handler("json:dumps")({"a": 1})
    '{"a": 1}'
    """
    module_name, attribute = _split(spec)
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigurationError(
                f"handler {spec!r}: no module named {exc.name!r} (is it on PYTHONPATH, "
                f"or in the current directory {cwd!r}?)"
            ) from exc
        raise ConfigurationError(f"handler {spec!r}: importing it failed: {exc!r}") from exc
    except Exception as exc:  # any import-time error is the handler's configuration
        raise ConfigurationError(f"handler {spec!r}: importing it failed: {exc!r}") from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigurationError(
                f"handler {spec!r}: {module_name!r} has no attribute {attribute!r}"
            ) from None
    target = getattr(target, "__pail_run__", target)
    if not callable(target):
        raise ConfigurationError(f"handler {spec!r} is a {type(target).__name__}, not a function")
    _check_arity(spec, target)
    handler: Callable[[Any], Any] = target
    return handler


def _split(spec: str) -> tuple[str, str]:
    spec = spec.strip()
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
    else:
        module_name, _, attribute = spec.rpartition(".")
    if not module_name or not attribute:
        raise ConfigurationError(
            f"handler must look like 'package.module:function', got {spec!r} "
            f"(set --handler or {config.ENV_HANDLER})"
        )
    return module_name, attribute


def _check_arity(spec: str, target: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # a builtin without a signature: let the call decide
    try:
        signature.bind(object())
    except TypeError:
        raise ConfigurationError(
            f"handler {spec!r} must take one argument, the job's payload; its signature is "
            f"{signature}"
        ) from None


# -- signals and limits -----------------------------------------------------------


@contextmanager
def _signals_routed_to(limits: ProcessLimits, install: bool) -> Iterator[None]:
    if not install or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, limits.on_signal) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# -- running ---------------------------------------------------------------------


def run(
    pail: Pail,
    handler: Handler,
    *,
    once: bool,
    max_jobs: int | None = None,
    time_budget: float | None = None,
    poll_interval: float = 20.0,
    install_signal_handlers: bool = True,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    job_timeout: float | None = None,
    min_poll_interval: float = 0.1,
    stop: threading.Event | None = None,
    observer: Observer | None = None,
) -> RunSummary:
    """Run ``handler(payload)`` on the queue's jobs until done; see the module docstring.

    ``once`` drains (stops on an empty queue, after ``max_jobs``, default 1);
    otherwise it serves until a signal, ``stop``, ``max_jobs`` or
    ``time_budget``. Signal handlers are installed only when called from the
    main thread, and the previous ones are put back on return. ``observer``
    sees each job start and end (default: ``drain.LoggingObserver``).

    >>> from pail.store import MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> _ = queue.enqueue({"n": 2})
    >>> run(queue, lambda p: p["n"] * 2, once=True, install_signal_handlers=False).to_json()
    {'processed': 1, 'succeeded': 1, 'failed': 0, 'released': 0, 'retried': 0, 'dead_lettered': 0, 'returned': 0, 'unrecorded': 0, 'stop_reason': 'max_jobs', 'error': None}
    """
    if max_jobs is not None and max_jobs < 1:
        raise ConfigurationError(f"max_jobs must be >= 1, got {max_jobs}")
    if once and max_jobs is None:
        max_jobs = 1
    limits = ProcessLimits(time_budget=time_budget, grace_period=grace_period, stop=stop)
    polling = None if once else Polling(min(min_poll_interval, poll_interval), poll_interval)
    with _signals_routed_to(limits, install_signal_handlers):
        tally = drain(
            pail.claim,
            handler,
            limits,
            max_jobs=max_jobs,
            job_timeout=job_timeout,
            polling=polling,
            observer=observer,
        )
    if limits.signals:
        log.info("stopped on %s", limits.signal_name)
    return tally


# -- entry points ----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, *, once: bool) -> None:
    """The runner's options, for ``python -m pail.runner`` and the ``pail`` CLI alike."""
    parser.add_argument(
        "--handler",
        help=f"the job function, 'package.module:function' (default: ${config.ENV_HANDLER})",
    )
    parser.add_argument("--bucket", help=f"the queue's bucket (default: ${config.ENV_BUCKET})")
    parser.add_argument("--queue", help=f"the queue's namespace (default: ${config.ENV_QUEUE})")
    parser.add_argument(
        "--endpoint-url", help=f"an S3-compatible endpoint (default: ${config.ENV_ENDPOINT_URL})"
    )
    parser.add_argument(
        "--max-jobs",
        type=int,
        help=f"stop after this many jobs (default: ${config.ENV_MAX_JOBS}, "
        + ("else 1)" if once else "else no limit)"),
    )
    parser.add_argument(
        "--time-budget",
        type=parse_seconds,
        help=f"claim no job after this many seconds (default: ${config.ENV_TIME_BUDGET})",
    )
    parser.add_argument(
        "--grace-period",
        type=parse_seconds,
        help="seconds a running job may go on after SIGTERM before its lease is released "
        f"(default: ${config.ENV_GRACE_PERIOD}, else {DEFAULT_GRACE_PERIOD:g})",
    )
    parser.add_argument(
        "--job-timeout",
        type=parse_seconds,
        help=f"fail a job whose handler runs longer (default: ${config.ENV_JOB_TIMEOUT}, else none)",
    )
    if once:
        parser.add_argument(
            "--empty-exit-code",
            type=int,
            default=EXIT_EMPTY,
            help=f"exit code when the queue was empty (default: {EXIT_EMPTY})",
        )
    else:
        parser.add_argument(
            "--poll-interval",
            type=parse_seconds,
            default=20.0,
            help="the longest wait between two claims on an empty queue (default: 20)",
        )


def main_with_args(
    args: argparse.Namespace, *, once: bool, env: Mapping[str, str] | None = None
) -> int:
    """Run from parsed ``add_arguments`` options; return the exit code. Prints the summary."""
    env = os.environ if env is None else env
    try:
        summary = _run_from_args(args, once=once, env=env)
    except _CONFIG_ERRORS as exc:
        print(f"pail: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except PailError as exc:
        print(f"pail: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(summary.to_json()), flush=True)
    empty = getattr(args, "empty_exit_code", EXIT_EMPTY)
    return exit_code(summary, empty=empty)


def _run_from_args(args: argparse.Namespace, *, once: bool, env: Mapping[str, str]) -> RunSummary:
    spec = args.handler or env.get(config.ENV_HANDLER, "")
    if not spec:
        raise ConfigurationError(f"no handler: pass --handler or set {config.ENV_HANDLER}")
    handler = load_handler(spec)
    settings = config.Settings.from_env(
        env, bucket=args.bucket, queue=args.queue, endpoint_url=args.endpoint_url
    )
    pail = Pail.connect(
        settings.bucket,
        endpoint_url=settings.endpoint_url,
        queue=settings.queue,
        visibility_timeout=settings.visibility_timeout,
        max_retries=settings.max_retries,
    )
    max_jobs = args.max_jobs if args.max_jobs is not None else read_count(config.ENV_MAX_JOBS, env)
    budget = (
        args.time_budget
        if args.time_budget is not None
        else read_seconds(config.ENV_TIME_BUDGET, env)
    )
    grace = (
        args.grace_period
        if args.grace_period is not None
        else read_seconds(config.ENV_GRACE_PERIOD, env, DEFAULT_GRACE_PERIOD)
    )
    job_timeout = (
        args.job_timeout
        if args.job_timeout is not None
        else read_seconds(config.ENV_JOB_TIMEOUT, env)
    )
    log.info(
        "pail %s: bucket %s, queue %r, handler %s",
        "work-once" if once else "work",
        settings.bucket,
        settings.queue,
        spec,
    )
    return run(
        pail,
        handler,
        once=once,
        max_jobs=max_jobs,
        time_budget=budget,
        poll_interval=getattr(args, "poll_interval", 20.0),
        grace_period=grace,
        job_timeout=job_timeout,
    )


def main_work_once(argv: Sequence[str] | None = None) -> int:
    """``work-once``: drain up to ``--max-jobs`` jobs (default 1), then exit. Returns the exit code."""
    return _main(argv, once=True)


def main_work(argv: Sequence[str] | None = None) -> int:
    """``work``: serve the queue until SIGTERM. Returns the exit code."""
    return _main(argv, once=False)


def _main(argv: Sequence[str] | None, *, once: bool) -> int:
    parser = argparse.ArgumentParser(
        prog="pail work-once" if once else "pail work",
        description=(
            "Process jobs, then exit." if once else "Process jobs until SIGTERM or SIGINT."
        ),
    )
    add_arguments(parser, once=once)
    args = parser.parse_args(argv)
    _configure_logging()
    return main_with_args(args, once=once)


def _configure_logging() -> None:
    if logging.getLogger().handlers:
        return
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pail.runner work-once|work [options]``: a task command without the CLI."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"work-once": main_work_once, "work": main_work}
    if not argv or argv[0] not in commands:
        print("usage: python -m pail.runner {work-once,work} [options]", file=sys.stderr)
        return EXIT_CONFIG
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
