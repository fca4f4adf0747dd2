"""Settings: the name of every environment variable pail reads, and every default.

This module is the single place those names and defaults are spelled. Every
entry point (``Pail.from_env``, the worker and reaper Lambdas, ``pail`` and
its ``work``/``work-once``, the runner) resolves its settings here, through
``Settings.from_env`` (where the queue is), ``RunSettings.from_env`` (how a
worker runs) and ``resolve`` under both; the CDK construct imports the same
constants to set them, so the two cannot drift.

Precedence, as in Powertools' ``resolve_env_var_choice``, written once in
``resolve``: an explicit argument beats the environment, which beats the
default. An unset or blank variable counts as not set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from pail.bounds import (
    validate_count,
    validate_max_retries,
    validate_seconds,
    validate_visibility_timeout,
)
from pail.errors import ConfigurationError
from pail.keys import MAX_SHARDS, validate_shards

ENV_BUCKET = "PAIL_BUCKET"
ENV_QUEUE = "PAIL_QUEUE"
ENV_ENDPOINT_URL = "PAIL_ENDPOINT_URL"
ENV_VISIBILITY_TIMEOUT = "PAIL_VISIBILITY_TIMEOUT"
ENV_MAX_RETRIES = "PAIL_MAX_RETRIES"
ENV_SHARDS = "PAIL_SHARDS"
ENV_RECLAIM = "PAIL_RECLAIM"
"""Whether a worker's claims reclaim expired leases themselves, once per visibility timeout
(true by default; ``pail.protocol.reclaim``). The construct's functions and tasks set it false:
their scheduled reaper does that work."""
ENV_HANDLER = "PAIL_HANDLER"
ENV_WORKER_FUNCTION = "PAIL_WORKER_FUNCTION"
ENV_SAFETY_MARGIN = "PAIL_SAFETY_MARGIN_SECONDS"
ENV_MAX_JOBS = "PAIL_MAX_JOBS"
ENV_TIME_BUDGET = "PAIL_TIME_BUDGET_SECONDS"
ENV_TRACING = "PAIL_TRACING"
ENV_GRACE_PERIOD = "PAIL_GRACE_PERIOD_SECONDS"
ENV_JOB_TIMEOUT = "PAIL_JOB_TIMEOUT_SECONDS"
ENV_SELF_HEAL_AFTER = "PAIL_SELF_HEAL_AFTER_SECONDS"
ENV_METRICS = "PAIL_METRICS"
"""``pail work``'s metrics: ``emf`` (CloudWatch EMF lines on stdout), ``none``, or ``auto``."""
ENV_TASK_PROTECTION = "PAIL_TASK_PROTECTION"
"""``pail work``/``work-once`` inside ECS: protect the task from scale-in while it runs a job
(true by default; ``pail.runner.protection``)."""
ENV_SCHEDULES = "PAIL_SCHEDULES"
"""The reaper Lambda: the schedules the CDK app declares (``PailQueue.add_schedule``), as JSON;
synced into the bucket on the function's first run (``pail.protocol.schedules.registry.sync``)."""
ENV_LIMITS = "PAIL_LIMITS"
"""The reaper Lambda: the limits the CDK app declares (``PailQueue(concurrency=, rate=, ...)``),
as the limits object's JSON; written into the bucket on the function's first run after a
deploy that changed them (``pail.protocol.limits.declared``)."""
ENV_ECS_AGENT_URI = "ECS_AGENT_URI"
"""Not pail's: the container agent's endpoint, which ECS sets in every task's containers."""

ALL_ENV_VARS: tuple[str, ...] = (
    ENV_BUCKET,
    ENV_QUEUE,
    ENV_ENDPOINT_URL,
    ENV_VISIBILITY_TIMEOUT,
    ENV_MAX_RETRIES,
    ENV_SHARDS,
    ENV_RECLAIM,
    ENV_HANDLER,
    ENV_WORKER_FUNCTION,
    ENV_SAFETY_MARGIN,
    ENV_MAX_JOBS,
    ENV_TIME_BUDGET,
    ENV_TRACING,
    ENV_GRACE_PERIOD,
    ENV_JOB_TIMEOUT,
    ENV_SELF_HEAL_AFTER,
    ENV_METRICS,
    ENV_TASK_PROTECTION,
    ENV_SCHEDULES,
    ENV_LIMITS,
)

DEFAULT_VISIBILITY_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_RECLAIM = True
"""Claims reclaim expired leases (once per visibility timeout), as pailq 0.1.1's did."""
UNLIMITED = "none"
DEFAULT_POLL_INTERVAL = 20.0
"""The longest wait between two claims of an idle worker (``work``), in seconds."""
DEFAULT_MIN_POLL_INTERVAL = 0.1
"""The first wait of an idle worker; it doubles up to the poll interval."""
DEFAULT_GRACE_PERIOD = 25.0
"""Seconds a running job may go on after SIGTERM. ECS waits 30 s (``stopTimeout``)
before SIGKILL; the rest is kept for giving the lease back."""
DEFAULT_SAFETY_MARGIN = 10.0
"""Seconds: a worker Lambda claims no job with less than this left in the invocation."""
DEFAULT_SELF_HEAL_AFTER = 60.0
"""Seconds the oldest pending job may wait, with no worker running, before the reaper wakes one."""

OVERLAP_THREADS = 3
"""Threads of one worker's overlap pool (``pail.protocol.overlap``): the claim's HEAD beside its
DELETE, the lease removal after a result, and the next candidate's read, at once at most."""
WORKER_IN_FLIGHT = 1 + OVERLAP_THREADS + 1
"""Requests one worker thread can have in flight: its own, its pool's, and its heartbeat's."""
CLIENT_WORKER_THREADS = 10
"""Worker threads one S3 client is sized for (``store.client``): ``WORKER_IN_FLIGHT`` connections each."""


def parse_max_retries(text: str) -> int | None:
    """Parse a retry ceiling: a non-negative integer, or ``none`` for no ceiling.

    >>> parse_max_retries("3"), parse_max_retries("none")
    (3, None)
    """
    if text.strip().lower() == UNLIMITED:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(
            f"max_retries must be an integer or 'none', got {text!r}"
        ) from None
    return validate_max_retries(value)


def validate_endpoint_url(url: str, *, source: str = "endpoint_url") -> str:
    """``url`` if it can be an S3 endpoint (``http(s)://host[:port][/path]``), else a ``ConfigurationError``.

    ``source`` names where the value came from (an option, a variable) in the message.
    botocore would only say "Invalid endpoint", as a bare ``ValueError``, at connect time.

    >>> validate_endpoint_url("http://127.0.0.1:9000")
    'http://127.0.0.1:9000'
    >>> validate_endpoint_url("not-a-url")
    Traceback (most recent call last):
    ...
    pail.errors.ConfigurationError: endpoint_url must be an http:// or https:// URL with a host, such as http://127.0.0.1:9000; got 'not-a-url'
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{source} must be an http:// or https:// URL with a host, "
            f"such as http://127.0.0.1:9000; got {url!r}"
        )
    return text


# -- Reading the environment: one precedence, one parser per kind of value -------------------

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def resolve[T](
    choice: T | None,
    name: str,
    env: Mapping[str, str] | None,
    *,
    default: T,
    parse: Callable[[str, str], T],
) -> T:
    """One setting: ``choice`` if given (not None), else ``$name`` parsed, else ``default``.

    The one place the precedence is written. An unset or blank variable is
    not given; one that ``parse`` refuses is a ``ConfigurationError`` naming it.

    >>> env = {"PAIL_MAX_JOBS": "5"}
    >>> resolve(None, "PAIL_MAX_JOBS", env, default=None, parse=parse_count)
    5
    >>> resolve(2, "PAIL_MAX_JOBS", env, default=None, parse=parse_count)
    2
    >>> resolve(None, "PAIL_MAX_JOBS", {}, default=None, parse=parse_count) is None
    True
    """
    if choice is not None:
        return choice
    text = (os.environ if env is None else env).get(name, "").strip()
    return parse(text, name) if text else default


def parse_text(text: str, name: str = "value") -> str:
    """``text`` as given (a name, a URL...)."""
    return text


def parse_seconds(text: str, name: str = "seconds") -> float:
    """``text`` as a finite number of seconds from 0 to ``MAX_SECONDS``.

    >>> parse_seconds("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {text!r}") from None
    return validate_seconds(name, value)


def parse_count(text: str, name: str = "count") -> int:
    """``text`` as a whole number >= 1.

    >>> parse_count("10")
    10
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigurationError(f"{name} must be a whole number >= 1, got {text!r}")
    return value


def parse_flag(text: str, name: str = "flag") -> bool:
    """A boolean written as true/false, yes/no, on/off or 1/0.

    >>> parse_flag("yes"), parse_flag("OFF")
    (True, False)
    """
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ConfigurationError(f"{name} must be true or false, got {text!r}")


def parse_shards(text: str, name: str = ENV_SHARDS) -> int:
    """``text`` as a shard count: a power of two from 1 to 1024.

    >>> parse_shards("16")
    16
    """
    try:
        return validate_shards(int(text))
    except ValueError:
        raise ConfigurationError(
            f"{name} must be a power of two from 1 to {MAX_SHARDS}, got {text!r}"
        ) from None


def _parse_endpoint(text: str, name: str) -> str:
    return validate_endpoint_url(text, source=name)


def _parse_max_retries(text: str, name: str) -> int | None:
    return parse_max_retries(text)


class _NotGiven(Enum):
    NOT_GIVEN = "not given"


NOT_GIVEN = _NotGiven.NOT_GIVEN
"""For a setting where None is a value (``max_retries=None``: no ceiling): not given at all."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Where a queue is and how its jobs are retried: what every entry point connects with.

    ``region`` and ``profile`` have no ``PAIL_*`` variable: boto3 reads
    ``AWS_REGION`` and ``AWS_PROFILE`` itself.
    """

    bucket: str
    queue: str = ""
    endpoint_url: str | None = None
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT
    max_retries: int | None = DEFAULT_MAX_RETRIES
    region: str | None = None
    profile: str | None = None
    shards: int | None = None
    """How many prefixes the queue's keys spread over (``pail.keys``; ``docs/scaling.md``).
    None: not given, so the queue's layout marker says (``pail.protocol.layout``)."""
    reclaim: bool = DEFAULT_RECLAIM
    """Whether claims reclaim expired leases themselves (``pail.protocol.reclaim``)."""

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        bucket: str | None = None,
        queue: str | None = None,
        endpoint_url: str | None = None,
        visibility_timeout: float | None = None,
        max_retries: int | _NotGiven | None = NOT_GIVEN,
        region: str | None = None,
        profile: str | None = None,
        shards: int | None = None,
        reclaim: bool | None = None,
    ) -> Settings:
        """Resolve each setting: the argument, then its ``PAIL_*`` variable in ``env`` (default
        ``os.environ``), then the default. ``max_retries=None`` is no ceiling, not "not given".

        >>> Settings.from_env({"PAIL_BUCKET": "jobs", "PAIL_MAX_RETRIES": "5"}).max_retries
        5
        """
        resolved_bucket = resolve(bucket, ENV_BUCKET, env, default="", parse=parse_text)
        if not resolved_bucket:
            raise ConfigurationError(f"no bucket: set {ENV_BUCKET} or pass bucket=")
        if endpoint_url is not None:
            endpoint_url = validate_endpoint_url(endpoint_url)
        retries = max_retries
        if retries is NOT_GIVEN:
            unlimited_or_count: int | None = DEFAULT_MAX_RETRIES
            retries = resolve(
                None, ENV_MAX_RETRIES, env, default=unlimited_or_count, parse=_parse_max_retries
            )
        timeout = resolve(
            visibility_timeout,
            ENV_VISIBILITY_TIMEOUT,
            env,
            default=DEFAULT_VISIBILITY_TIMEOUT,
            parse=parse_seconds,
        )
        return cls(
            bucket=resolved_bucket,
            queue=resolve(queue, ENV_QUEUE, env, default="", parse=parse_text),
            endpoint_url=resolve(
                endpoint_url, ENV_ENDPOINT_URL, env, default=None, parse=_parse_endpoint
            ),
            visibility_timeout=validate_visibility_timeout(timeout),
            max_retries=validate_max_retries(retries),
            region=region,
            profile=profile,
            shards=_validated_shards(
                resolve(shards, ENV_SHARDS, env, default=None, parse=parse_shards)
            ),
            reclaim=resolve_reclaim(reclaim, env),
        )


def resolve_reclaim(choice: bool | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether claims reclaim: ``choice`` if given, else ``$PAIL_RECLAIM``, else true.

    >>> resolve_reclaim(None, {}), resolve_reclaim(None, {"PAIL_RECLAIM": "false"})
    (True, False)
    """
    return resolve(choice, ENV_RECLAIM, env, default=DEFAULT_RECLAIM, parse=parse_flag)


def _validated_shards(shards: int | None) -> int | None:
    if shards is None:
        return None  # discovered from the bucket (pail.protocol.layout)
    try:
        return validate_shards(shards)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How a worker runs: ``pail work``/``work-once`` and the runner, and the worker Lambda.

    Each field is resolved by ``from_env`` as every setting is (argument,
    ``PAIL_*`` variable, default) and checked against its bounds.
    """

    handler: str | None = None
    """``module:function``; required by the runner, not by the Lambda (which is given ``run``)."""
    max_jobs: int | None = None
    time_budget: float | None = None
    grace_period: float = DEFAULT_GRACE_PERIOD
    job_timeout: float | None = None
    safety_margin: float = DEFAULT_SAFETY_MARGIN

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        handler: str | None = None,
        max_jobs: int | None = None,
        time_budget: float | None = None,
        grace_period: float | None = None,
        job_timeout: float | None = None,
        safety_margin: float | None = None,
    ) -> RunSettings:
        """Resolve each setting: the argument, then its ``PAIL_*`` variable, then the default.

        >>> RunSettings.from_env({"PAIL_MAX_JOBS": "4"}, job_timeout=60).max_jobs
        4
        """
        jobs = resolve(max_jobs, ENV_MAX_JOBS, env, default=None, parse=parse_count)
        budget = resolve(time_budget, ENV_TIME_BUDGET, env, default=None, parse=parse_seconds)
        timeout = resolve(job_timeout, ENV_JOB_TIMEOUT, env, default=None, parse=parse_seconds)
        grace = resolve(
            grace_period, ENV_GRACE_PERIOD, env, default=DEFAULT_GRACE_PERIOD, parse=parse_seconds
        )
        margin = resolve(
            safety_margin,
            ENV_SAFETY_MARGIN,
            env,
            default=DEFAULT_SAFETY_MARGIN,
            parse=parse_seconds,
        )
        return cls(
            handler=resolve(handler, ENV_HANDLER, env, default=None, parse=parse_text) or None,
            max_jobs=None if jobs is None else validate_count("max_jobs", jobs, minimum=1),
            time_budget=None if budget is None else validate_seconds("time_budget", budget),
            grace_period=validate_seconds("grace_period", grace),
            job_timeout=(
                None
                if timeout is None
                else validate_seconds("job_timeout", timeout, above_minimum=True)
            ),
            safety_margin=validate_seconds("safety_margin", margin, above_minimum=True),
        )
