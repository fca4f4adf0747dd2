"""Priorities: a high-priority job is claimed before the normal backlog.

A high-priority job is a delayed job due at the epoch: its entry
``queue/!0000000000000-{id}`` sorts before every other pending key, so the
next refill of any worker's page promotes it and puts it first in that
worker's walk (``pail.features.delay``). A normal job costs nothing more;
a high one costs the promotion (3 requests). Its retries are normal jobs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pail.errors import ConfigurationError

HIGH_DUE = datetime(1970, 1, 1, tzinfo=UTC)
"""The due time of a high-priority entry: always due, and before any real due time."""


class Priority(StrEnum):
    """The two classes of job."""

    HIGH = "high"
    NORMAL = "normal"


def parse_priority(value: str | Priority) -> Priority:
    """``value`` as a ``Priority``, or ``ConfigurationError``.

    >>> parse_priority("high")
    <Priority.HIGH: 'high'>
    """
    try:
        return Priority(value)
    except ValueError:
        choices = ", ".join(p.value for p in Priority)
        raise ConfigurationError(f"priority must be one of {choices}, got {value!r}") from None


def due_for(priority: str | Priority, due: datetime | None) -> datetime | None:
    """The due time of an entry with ``priority``: high jumps ahead unless it is delayed."""
    if parse_priority(priority) is Priority.HIGH and due is None:
        return HIGH_DUE
    return due
