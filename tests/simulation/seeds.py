"""Which seeds CI simulates: a fixed range it replays every run, and a range that moves each day.

The fixed seeds (from 0) keep CI's verdict comparable from one commit to the
next; the day's seeds are ones no earlier day ran, so over a month a family
explores thirty times its fresh count at the cost of one run's. A failing
seed is printed with its replay command, whichever range it came from.

A family's counts come from ``PAIL_SIM_{FAMILY}_SEEDS`` (fixed) and
``PAIL_SIM_{FAMILY}_NEW_SEEDS`` (the day's); ``PAIL_SIM_NEW_SEED_START``
pins where the day's range starts, to replay a day on another.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

NEW_SEED_BASE = 1_000_000
"""The day's seeds start here or above: never one of the fixed seeds (they stay below)."""


def todays(count: int, today: datetime.date | None = None) -> range:
    """``count`` seeds for ``today`` (UTC by default), or from ``PAIL_SIM_NEW_SEED_START`` if set.

    Day ``d`` (days since 0001-01-01) runs ``BASE + d * count`` to ``BASE + (d + 1) * count``:
    a new range every day, the same for every run that day.

    >>> todays(3, datetime.date(1, 1, 2))
    range(1000006, 1000009)
    """
    start = os.environ.get("PAIL_SIM_NEW_SEED_START")
    if start is not None:
        return range(int(start), int(start) + count)
    day = (today or datetime.datetime.now(datetime.UTC).date()).toordinal()
    return range(NEW_SEED_BASE + day * count, NEW_SEED_BASE + (day + 1) * count)


@dataclass(frozen=True)
class FamilySeeds:
    """A family's seeds for this run: ``fixed`` (from 0) then the day's ``fresh``."""

    fixed: range
    fresh: range

    @classmethod
    def of(cls, family: str, *, fixed: int, fresh: int) -> FamilySeeds:
        """The counts from ``PAIL_SIM_{family}_SEEDS`` and ``..._NEW_SEEDS``, else the defaults.

        >>> FamilySeeds.of("EXAMPLE", fixed=4, fresh=0).ranges
        (range(0, 4), range(1000000, 1000000))
        """
        fixed = int(os.environ.get(f"PAIL_SIM_{family}_SEEDS", str(fixed)))
        fresh = int(os.environ.get(f"PAIL_SIM_{family}_NEW_SEEDS", str(fresh)))
        return cls(range(fixed), todays(fresh))

    @property
    def ranges(self) -> tuple[range, range]:
        return (self.fixed, self.fresh)

    def __len__(self) -> int:
        return len(self.fixed) + len(self.fresh)

    def __str__(self) -> str:
        return (
            f"{len(self)} seeds: {self.fixed.start} to {self.fixed.stop - 1} and today's "
            f"{self.fresh.start} to {self.fresh.stop - 1} (PAIL_SIM_NEW_SEED_START)"
        )

    def all(self) -> list[int]:
        return [*self.fixed, *self.fresh]
