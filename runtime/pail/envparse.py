"""Reading the numeric and boolean environment variables of the entry points.

The names themselves live in ``pail.config``; this module only turns their
text into values, with an error that names the variable when it cannot.
An unset or empty variable means "use the default".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import overload

from pail.config import validate_seconds
from pail.errors import ConfigurationError

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _text(name: str, env: Mapping[str, str] | None) -> str | None:
    value = (os.environ if env is None else env).get(name, "").strip()
    return value or None


@overload
def read_seconds(name: str, env: Mapping[str, str] | None = None) -> float | None: ...


@overload
def read_seconds(name: str, env: Mapping[str, str] | None, default: float) -> float: ...


@overload
def read_seconds(name: str, env: Mapping[str, str] | None = None, *, default: float) -> float: ...


def read_seconds(
    name: str, env: Mapping[str, str] | None = None, default: float | None = None
) -> float | None:
    """A duration in seconds (>= 0), or ``default`` when unset.

    >>> read_seconds("PAIL_GRACE_PERIOD_SECONDS", {"PAIL_GRACE_PERIOD_SECONDS": "2.5"})
    2.5
    """
    text = _text(name, env)
    if text is None:
        return default
    return parse_seconds(text, name)


def parse_seconds(text: str, name: str = "seconds") -> float:
    """``text`` as a finite number of seconds from 0 to ``config.MAX_SECONDS``.

    Also an ``argparse`` type: its ``ConfigurationError`` is a ``ValueError``.

    >>> parse_seconds("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {text!r}") from None
    return validate_seconds(name, value)


def read_count(
    name: str, env: Mapping[str, str] | None = None, default: int | None = None
) -> int | None:
    """A whole number >= 1, or ``default`` when unset.

    >>> read_count("PAIL_MAX_JOBS", {"PAIL_MAX_JOBS": "10"})
    10
    """
    text = _text(name, env)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigurationError(f"{name} must be a whole number >= 1, got {text!r}")
    return value


def read_flag(name: str, env: Mapping[str, str] | None = None, default: bool = False) -> bool:
    """A boolean written as true/false, yes/no, on/off or 1/0; ``default`` when unset.

    >>> read_flag("PAIL_TRACING", {"PAIL_TRACING": "true"})
    True
    """
    text = _text(name, env)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ConfigurationError(f"{name} must be true or false, got {text!r}")
