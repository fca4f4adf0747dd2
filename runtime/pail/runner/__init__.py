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

Inside an ECS task (``ECS_AGENT_URI`` set) the task protects itself from
scale-in while it holds a job, and drops the protection when a claim finds
the queue empty and when the run ends (``pail.runner.protection``).

``pail work-once`` and ``pail work`` (``pail.cli.workers``) are this
runner's command line, and the Fargate task runs them; their exit codes are in
``pail.cli.exit_codes``. ``python -m pail.runner work-once|work [options]``
is the same command, for an image without the ``pail`` console script.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pail import config
from pail.config import DEFAULT_GRACE_PERIOD, DEFAULT_MIN_POLL_INTERVAL, DEFAULT_POLL_INTERVAL
from pail.drain import Handler, Interrupts, Observer, Polling, ProcessLimits, Tally, drain
from pail.errors import ConfigurationError
from pail.queue import Pail
from pail.runner.protection import TaskProtection

log = logging.getLogger("pail.runner")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


RunSummary = Tally
"""What a run did: ``pail.drain.Tally``, the one summary every entry point returns."""


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
                f"or in the current directory {cwd!r}?{_beside_hint(module_name)})"
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


def _beside_hint(module_name: str) -> str:
    """A hint when the module is in a folder just below this one (``handlers/report.py``).

    That is the layout of an app whose image puts the folder on the import
    path: the spelling that works there needs the folder on PYTHONPATH here.
    """
    relative = Path(*module_name.split("."))
    for candidate in (relative.with_suffix(".py"), relative / "__init__.py"):
        found = sorted(Path.cwd().glob(f"*/{candidate}"))
        if found:
            folder = found[0].relative_to(Path.cwd()).parts[0]
            return (
                f" {folder}/{candidate} is here: put its folder on the import path, "
                f"PYTHONPATH={folder}, as the worker image does"
            )
    return ""


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


@contextmanager
def _protecting(protection: TaskProtection | None) -> Iterator[None]:
    """Whatever ends the run (an error, a signal, the handler), the task's protection is dropped."""
    try:
        yield
    finally:
        if protection is not None:
            protection.close()


# -- running ---------------------------------------------------------------------


def run(
    pail: Pail,
    handler: Handler,
    *,
    once: bool,
    max_jobs: int | None = None,
    time_budget: float | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    install_signal_handlers: bool = True,
    grace_period: float = DEFAULT_GRACE_PERIOD,
    job_timeout: float | None = None,
    min_poll_interval: float = DEFAULT_MIN_POLL_INTERVAL,
    stop: threading.Event | None = None,
    observer: Observer | None = None,
    protection: TaskProtection | None = None,
) -> RunSummary:
    """Run ``handler(payload)`` on the queue's jobs until done; see the module docstring.

    ``once`` drains (stops on an empty queue, after ``max_jobs``, default 1);
    otherwise it serves until a signal, ``stop``, ``max_jobs`` or
    ``time_budget``. Signal handlers are installed only when called from the
    main thread, and the previous ones are put back on return. ``observer``
    sees each job start and end (default: ``drain.LoggingObserver``).
    ``protection``: the ECS task's scale-in protection (default: from the
    environment, ``TaskProtection.from_env``; None outside ECS).

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
    limits = ProcessLimits(
        time_budget=time_budget, grace_period=grace_period, stop=stop, clock=pail.clock.monotonic
    )
    polling = None if once else Polling(min(min_poll_interval, poll_interval), poll_interval)
    if protection is None:
        protection = TaskProtection.from_env(None, visibility_timeout=pail.visibility_timeout)
    claim = pail.poll if polling is not None else pail.claim
    with _signals_routed_to(limits, install_signal_handlers), _protecting(protection):
        tally = drain(
            claim if protection is None else protection.claiming(claim),
            handler,
            limits,
            max_jobs=max_jobs,
            job_timeout=job_timeout,
            polling=polling,
            observer=observer,
            clock=pail.clock,
            paused=lambda: pail.claims_paused,
            limited=pail.claims_limited_for,
            flush=pail.flush,
            interrupts=Interrupts.FAIL,  # a service never dies on one job; Ctrl-C is a signal here
        )
    if limits.signals:
        log.info("stopped on %s", limits.signal_name)
    return tally
