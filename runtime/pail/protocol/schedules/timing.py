"""When a schedule's ticks fall: a cron expression in a time zone, or a fixed interval.

Cron expressions are evaluated by ``cronsim`` (small, pure Python, kept; it is
what healthchecks.io runs its own cron checks on, Debian cron's semantics
included: day-of-month and day-of-week OR-ed unless one is ``*``, DST gaps and
repeats handled like Debian cron). pail adds what it lacks, the ``@daily``
style aliases, and holds the dialect to the classic 5 fields (cronsim also
takes a seconds field, which no scheduler running once a minute could keep).

A fixed interval (``every``) ticks at whole multiples of it since the Unix
epoch (UTC), so the ticks do not move when the schedule is replaced and two
schedulers compute the same ones; an hourly schedule ticks on the hour.

Every tick is a whole second, in UTC once computed: the dedup key of a tick
(``runner.tick_key``) names it exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from pail.errors import ConfigurationError

ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The aliases Vixie cron and its heirs accept (``@reboot`` has no meaning here)."""

MAX_EXPRESSION = 200
"""The longest cron expression accepted (a definition in the bucket is input)."""
MIN_EVERY = 1
MAX_EVERY = 366 * 86_400
"""An interval is 1 second to a year, in whole seconds."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Timing:
    """When the ticks fall: exactly one of ``cron`` (in ``timezone``) and ``every`` (seconds).

    Build it with ``Timing.of``, which checks everything and raises
    ``ConfigurationError`` for what it cannot honour.

    >>> t = Timing.of(cron="@daily", timezone="Europe/Berlin")
    >>> t.cron, [x.isoformat() for x in t.latest(datetime(2026, 1, 3, 12, tzinfo=UTC), limit=2)]
    ('0 0 * * *', ['2026-01-01T23:00:00+00:00', '2026-01-02T23:00:00+00:00'])
    >>> Timing.of(every=3600).next_after(datetime(2026, 1, 1, 10, 30, tzinfo=UTC)).isoformat()
    '2026-01-01T11:00:00+00:00'
    """

    cron: str | None
    every: int | None
    timezone: str = "UTC"

    @classmethod
    def of(
        cls,
        *,
        cron: str | None = None,
        every: float | timedelta | None = None,
        timezone: str = "UTC",
    ) -> Timing:
        """A checked ``Timing``; ``ConfigurationError`` says what is wrong with the input."""
        if (cron is None) == (every is None):
            raise ConfigurationError("a schedule needs exactly one of cron= and every=")
        zone = _zone(timezone)
        if cron is not None:
            expression = _expression(cron)
            _cronsim(expression, datetime.now(zone))  # refuses what cronsim cannot evaluate
            return cls(expression, None, timezone)
        return cls(None, _every(every), timezone)

    @property
    def text(self) -> str:
        """How a person reads it: ``cron 0 2 * * * (Europe/Berlin)`` or ``every 3600 s``."""
        if self.cron is not None:
            return f"cron {self.cron} ({self.timezone})"
        return f"every {self.every} s"

    def latest(
        self, now: datetime, *, after: datetime | None = None, limit: int = 1
    ) -> list[datetime]:
        """The latest ``limit`` ticks at or before ``now`` and after ``after``, oldest first, in UTC."""
        ticks: list[datetime] = []
        if self.every is not None:
            k = math.floor((now - _EPOCH).total_seconds()) // self.every
            while len(ticks) < limit:
                tick = _EPOCH + timedelta(seconds=k * self.every)
                if after is not None and tick <= after:
                    break
                ticks.append(tick)
                k -= 1
        else:
            assert self.cron is not None
            local = now.astimezone(_zone(self.timezone))
            # cronsim's reverse walk includes the start only when it has microseconds.
            start = local.replace(microsecond=local.microsecond or 1)
            for found in _cronsim(self.cron, start, reverse=True):
                tick = found.astimezone(UTC)
                if len(ticks) >= limit or (after is not None and tick <= after):
                    break
                ticks.append(tick)
        ticks.reverse()
        return ticks

    def next_after(self, now: datetime) -> datetime:
        """The first tick strictly after ``now``, in UTC."""
        if self.every is not None:
            k = math.floor((now - _EPOCH).total_seconds()) // self.every + 1
            return _EPOCH + timedelta(seconds=k * self.every)
        assert self.cron is not None
        local = now.astimezone(_zone(self.timezone)).replace(microsecond=0)
        return next(_cronsim(self.cron, local)).astimezone(UTC)


def _expression(cron: object) -> str:
    if not isinstance(cron, str) or not cron.strip() or len(cron) > MAX_EXPRESSION:
        raise ConfigurationError(
            f"cron must be a cron expression of at most {MAX_EXPRESSION} characters, got {cron!r}"
        )
    text = " ".join(cron.split())
    if text.startswith("@"):
        alias = ALIASES.get(text.lower())
        if alias is None:
            raise ConfigurationError(
                f"unknown cron alias {text!r}: use one of {', '.join(ALIASES)}"
            )
        return alias
    if len(text.split()) != 5:
        raise ConfigurationError(
            f"cron expression {text!r} must have 5 fields (minute hour day-of-month month "
            "day-of-week), or be an alias such as @daily"
        )
    return text


def _cronsim(expression: str, start: datetime, *, reverse: bool = False) -> CronSim:
    try:
        return CronSim(expression, start, reverse=reverse)
    except (CronSimError, ValueError, IndexError, KeyError) as exc:
        raise ConfigurationError(f"invalid cron expression {expression!r}: {exc}") from None


def _zone(timezone: object) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone or len(timezone) > 100:
        raise ConfigurationError(f"timezone must be an IANA time zone name, got {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # ValueError: a path-like name ("../etc"); OSError: an unreadable zone file.
        raise ConfigurationError(
            f"unknown timezone {timezone!r} (use an IANA name such as 'Europe/Berlin'): {exc}"
        ) from None


def _every(every: object) -> int:
    if isinstance(every, timedelta):
        seconds: object = every.total_seconds()
    else:
        seconds = every
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds != int(seconds)
        or not MIN_EVERY <= seconds <= MAX_EVERY
    ):
        raise ConfigurationError(
            f"every must be a whole number of seconds from {MIN_EVERY} to {MAX_EVERY} "
            f"(or a timedelta of one), got {every!r}"
        )
    return int(seconds)
