"""Settings and the names of every environment variable pail reads.

This module is the single place those names are spelled. The Lambda and
Fargate entry points read them through ``Settings.from_env``; the CDK
construct imports the same constants to set them, so the two cannot drift.

Precedence, as in Powertools: an explicit argument beats the environment,
which beats the default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from pail.errors import ConfigurationError

ENV_BUCKET = "PAIL_BUCKET"
ENV_QUEUE = "PAIL_QUEUE"
ENV_ENDPOINT_URL = "PAIL_ENDPOINT_URL"
ENV_VISIBILITY_TIMEOUT = "PAIL_VISIBILITY_TIMEOUT"
ENV_MAX_RETRIES = "PAIL_MAX_RETRIES"
ENV_HANDLER = "PAIL_HANDLER"
ENV_WORKER_FUNCTION = "PAIL_WORKER_FUNCTION"
ENV_SAFETY_MARGIN = "PAIL_SAFETY_MARGIN_SECONDS"
ENV_MAX_JOBS = "PAIL_MAX_JOBS"
ENV_TIME_BUDGET = "PAIL_TIME_BUDGET_SECONDS"
ENV_TRACING = "PAIL_TRACING"
ENV_GRACE_PERIOD = "PAIL_GRACE_PERIOD_SECONDS"
ENV_JOB_TIMEOUT = "PAIL_JOB_TIMEOUT_SECONDS"
ENV_SELF_HEAL_AFTER = "PAIL_SELF_HEAL_AFTER_SECONDS"

ALL_ENV_VARS: tuple[str, ...] = (
    ENV_BUCKET,
    ENV_QUEUE,
    ENV_ENDPOINT_URL,
    ENV_VISIBILITY_TIMEOUT,
    ENV_MAX_RETRIES,
    ENV_HANDLER,
    ENV_WORKER_FUNCTION,
    ENV_SAFETY_MARGIN,
    ENV_MAX_JOBS,
    ENV_TIME_BUDGET,
    ENV_TRACING,
    ENV_GRACE_PERIOD,
    ENV_JOB_TIMEOUT,
    ENV_SELF_HEAL_AFTER,
)

DEFAULT_VISIBILITY_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
UNLIMITED = "none"

# -- Input bounds: every number and time the API and the CLI take is checked here --------
# (docs/protocol.md, "Input bounds", has the table.)

MAX_VISIBILITY_TIMEOUT = 43_200.0
"""12 hours, as SQS: a longer lease only delays the recovery of a job whose worker died."""
MAX_COUNT = 2**53 - 1
"""The largest attempt count (and ``max_retries``): exact in JSON and in a browser."""
MIN_EXPIRY, MAX_EXPIRY = 1, 604_800
"""Presigned URL lifetimes, in seconds: SigV4 allows 1 second to 7 days."""
MAX_RETRY_DELAY = 30 * 86_400.0
"""The longest wait a ``RetryPolicy`` may ask for between two attempts (30 days)."""
MAX_SECONDS = 366 * 86_400.0
"""The longest any other duration may be (poll intervals, budgets, timeouts): a year."""
MAX_DELAY = 1e10
"""Seconds (317 years): past it no due time fits a key anyway; bounded so it never overflows."""
MAX_DUE = datetime(2286, 11, 20, 17, 46, 39, 999_000, tzinfo=UTC)
"""The last due time a delayed entry's key can hold: 9,999,999,999,999 ms, its 13 digits."""


def validate_seconds(
    name: str,
    value: object,
    *,
    minimum: float = 0.0,
    maximum: float = MAX_SECONDS,
    above_minimum: bool = False,
) -> float:
    """``value`` as seconds if it is a finite number in bounds, else ``ConfigurationError``.

    Booleans are refused (``True`` is not a duration), and so are NaN and the infinities.

    >>> validate_seconds("delay", 2)
    2.0
    >>> validate_seconds("delay", float("nan"))
    Traceback (most recent call last):
    ...
    pail.errors.ConfigurationError: delay must be a finite number of seconds from 0 to 31622400, got nan
    """
    # .15g, not g: a year is "31622400" to a reader, not "3.16224e+07".
    low = f"above {minimum:.15g}" if above_minimum else f"from {minimum:.15g}"
    high = f"{maximum:.15g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(
            f"{name} must be a number of seconds {low} to {high}, got {value!r}"
        )
    number = float(value) if abs(value) < 1e308 else math.inf
    too_low = number <= minimum if above_minimum else number < minimum
    if not math.isfinite(number) or too_low or number > maximum:
        raise ConfigurationError(
            f"{name} must be a finite number of seconds {low} to {high}, got {value!r}"
        )
    return number


def validate_count(name: str, value: object, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """``value`` if it is a whole number in bounds (not a bool, not a float), else ``ConfigurationError``.

    >>> validate_count("max_jobs", 10, minimum=1)
    10
    """
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be a whole number from {minimum} to {maximum}, got {value!r}"
        )
    return value


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


def validate_max_retries(value: object) -> int | None:
    """``value`` if it is None (no ceiling) or a whole number >= 0, else ``ConfigurationError``."""
    if value is None:
        return None
    return validate_count("max_retries", value)


def validate_visibility_timeout(value: object) -> float:
    """``value`` if it is a lease length in (0, 12 hours], else ``ConfigurationError``."""
    return validate_seconds(
        "visibility_timeout", value, maximum=MAX_VISIBILITY_TIMEOUT, above_minimum=True
    )


def validate_expiry(value: object) -> int:
    """``value`` if it is a presigned URL lifetime S3 accepts (1 to 604800 whole seconds).

    >>> validate_expiry(3600)
    3600
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not (MIN_EXPIRY <= value <= MAX_EXPIRY)
    ):
        raise ConfigurationError(
            f"expires_in must be whole seconds from {MIN_EXPIRY} to {MAX_EXPIRY} (7 days), "
            f"got {value!r}"
        )
    return value


def validate_delay(value: object) -> float:
    """A delay in seconds (a number or a ``timedelta``): finite and >= 0.

    Where it lands is checked by ``validate_due`` (its key holds due times up to 2286).
    """
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return validate_seconds("delay", value, maximum=MAX_DELAY)


def validate_due(due: object, name: str = "not_before") -> datetime:
    """``due`` if it is an aware ``datetime`` a delayed entry's key can hold (up to ``MAX_DUE``)."""
    if not isinstance(due, datetime):
        raise ConfigurationError(f"{name} must be a datetime, got {type(due).__name__}")
    if due.tzinfo is None or due.utcoffset() is None:
        raise ConfigurationError(f"{name} must be timezone-aware (e.g. tzinfo=UTC)")
    if due > MAX_DUE:
        raise ConfigurationError(
            f"{name} must be at most {MAX_DUE.isoformat()} (a delayed job's key holds its due "
            f"time in 13 digits of milliseconds), got {due.isoformat()}"
        )
    return due


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


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a worker or reaper entry point needs to connect to its queue."""

    bucket: str
    queue: str = ""
    endpoint_url: str | None = None
    visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT
    max_retries: int | None = DEFAULT_MAX_RETRIES

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read settings from ``env`` (default ``os.environ``); ``overrides`` win.

        >>> Settings.from_env({"PAIL_BUCKET": "jobs", "PAIL_MAX_RETRIES": "5"}).max_retries
        5
        """
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        if ENV_BUCKET in env:
            values["bucket"] = env[ENV_BUCKET]
        if ENV_QUEUE in env:
            values["queue"] = env[ENV_QUEUE]
        if env.get(ENV_ENDPOINT_URL):
            values["endpoint_url"] = validate_endpoint_url(
                env[ENV_ENDPOINT_URL], source=ENV_ENDPOINT_URL
            )
        if ENV_VISIBILITY_TIMEOUT in env:
            try:
                values["visibility_timeout"] = float(env[ENV_VISIBILITY_TIMEOUT])
            except ValueError:
                raise ConfigurationError(
                    f"{ENV_VISIBILITY_TIMEOUT} must be a number of seconds, "
                    f"got {env[ENV_VISIBILITY_TIMEOUT]!r}"
                ) from None
        if ENV_MAX_RETRIES in env:
            values["max_retries"] = parse_max_retries(env[ENV_MAX_RETRIES])
        values.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(overrides.get("endpoint_url"), str):
            values["endpoint_url"] = validate_endpoint_url(str(overrides["endpoint_url"]))
        if not values.get("bucket"):
            raise ConfigurationError(f"no bucket: set {ENV_BUCKET} or pass bucket=")
        settings = cls(**values)  # type: ignore[arg-type]
        validate_visibility_timeout(settings.visibility_timeout)
        validate_max_retries(settings.max_retries)
        return settings
