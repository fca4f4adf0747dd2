"""Schedules: cron and fixed-interval jobs, one job per due tick whatever runs the ticks.

One concept per module:

* ``timing``: when the ticks fall (a cron expression in a time zone, or an interval);
* ``definition``: the record under ``_pail/schedules/{name}`` and its total codec;
* ``registry``: making, replacing, removing, listing, and syncing a deploy's schedules;
* ``runner``: the pass that enqueues each due tick, through the dedup mechanism.

``docs/schedules.md`` is the user's page: the dialect, the guarantees, the cost.
"""

from pail.protocol.schedules.definition import Schedule, validate_name
from pail.protocol.schedules.registry import ScheduleInfo
from pail.protocol.schedules.runner import Ticker, TickReport, tick_key
from pail.protocol.schedules.timing import Timing

__all__ = [
    "Schedule",
    "ScheduleInfo",
    "TickReport",
    "Ticker",
    "Timing",
    "tick_key",
    "validate_name",
]
