"""Input bounds: every number and time the API and the CLI take is checked here.

A leaf module (it imports only ``errors``), so the state machine in ``protocol/``
validates what it writes without reaching for the settings of the entry points.
docs/protocol.md, "Input bounds", has the table.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from pail.errors import ConfigurationError

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
