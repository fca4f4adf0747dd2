"""Settings and the names of every environment variable pail reads.

This module is the single place those names are spelled. The Lambda and
Fargate entry points read them through ``Settings.from_env``; the CDK
construct imports the same constants to set them, so the two cannot drift.

Precedence, as in Powertools: an explicit argument beats the environment,
which beats the default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

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


def validate_max_retries(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise ConfigurationError(f"max_retries must be >= 0 or None, got {value}")
    return value


def validate_visibility_timeout(value: float) -> float:
    if not value > 0:
        raise ConfigurationError(f"visibility_timeout must be > 0 seconds, got {value}")
    return float(value)


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
            values["endpoint_url"] = env[ENV_ENDPOINT_URL]
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
        if not values.get("bucket"):
            raise ConfigurationError(f"no bucket: set {ENV_BUCKET} or pass bucket=")
        settings = cls(**values)  # type: ignore[arg-type]
        validate_visibility_timeout(settings.visibility_timeout)
        validate_max_retries(settings.max_retries)
        return settings
