"""A queue's limits for people: the lines and the JSON ``pail limit show`` and the dashboard print."""

from __future__ import annotations

from typing import Any

from pail.protocol.limits import Limits
from pail.protocol.limits.rate import Rate, RateLimits


def read_rates(limits: Limits) -> RateLimits:
    """The rate section of a limits object (no request: it came with the object)."""
    return RateLimits.from_json(limits.extra.get("rate"))


def limits_json(limits: Limits, rates: RateLimits) -> dict[str, Any]:
    """A queue's limits as ``pail limit show --json`` prints them (and the dashboard shows them).

    >>> limits_json(Limits(concurrency=3), RateLimits(queue=Rate(10, 1)))["rate"]["queue"]
    '10/s'
    """
    return {
        "concurrency": limits.concurrency,
        "group_concurrency": limits.group_concurrency,
        "groups": dict(sorted(limits.groups.items())),
        "rate": {
            "queue": None if rates.queue is None else str(rates.queue),
            "group": None if rates.group is None else str(rates.group),
            "groups": {name: str(rate) for name, rate in sorted(rates.groups.items())},
        },
        "unreadable": limits.reason or rates.reason,
    }


def limit_lines(limits: Limits, rates: RateLimits) -> list[str]:
    """The human lines of ``pail limit show``: one per limit set, or "no limits".

    >>> limit_lines(Limits(concurrency=3, group_concurrency=2), RateLimits(queue=Rate(10, 1)))
    ['queue: at most 3 running at once', 'each group: at most 2 running at once', 'queue: at most 10/s starts']
    """
    lines: list[str] = []
    if limits.reason or rates.reason:
        lines.append(f"the limits object is unreadable ({limits.reason or rates.reason})")
    if limits.concurrency is not None:
        lines.append(f"queue: at most {limits.concurrency} running at once")
    if limits.group_concurrency is not None:
        lines.append(f"each group: at most {limits.group_concurrency} running at once")
    lines += [f"group {n}: at most {c} running at once" for n, c in sorted(limits.groups.items())]
    if rates.queue is not None:
        lines.append(f"queue: at most {rates.queue} starts")
    if rates.group is not None:
        lines.append(f"each group: at most {rates.group} starts")
    lines += [f"group {n}: at most {r} starts" for n, r in sorted(rates.groups.items())]
    return lines or ["no limits"]


__all__ = ["Rate", "limit_lines", "limits_json", "read_rates"]
