"""Groups: a job's group is the tail of its id, so a listing tells it with no request.

A job enqueued with ``group="tenant-42"`` gets the id ``{ULID}~tenant-42``.
Its pending entry's key therefore names its group, and a claimer that meets
a group at its limit passes its entries by without reading them (the whole
point: a busy tenant's 10,000 entries cost a LIST, never 10,000 GETs), and
can interleave a page's groups for fair sharing. The id still starts with
its ULID, so entries still list oldest first.

A group name is 1 to 64 characters of letters, digits, ``_ . : -``, starting
with a letter or digit: no ``~`` (so the last ``~`` of an id starts its
group) and no ``/`` (it is one key segment in a slot's key).
"""

from __future__ import annotations

import re

from pail.errors import ConfigurationError

MARK = "~"
"""What separates a job id from its group: ``{ULID}~{group}``."""
DEFAULT = "*"
"""The name ``set_limit(group=...)`` takes for the limit every group without its own has."""
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def valid(name: object) -> bool:
    """True for a group name pail accepts.

    >>> valid("tenant-42"), valid("a~b"), valid(""), valid("x" * 65)
    (True, False, False, False)
    """
    return isinstance(name, str) and bool(_GROUP.match(name))


def validate(name: str) -> str:
    """``name`` if it can name a group, else ``ConfigurationError``."""
    if not valid(name):
        raise ConfigurationError(
            f"invalid group {name!r}: expected 1-64 characters of letters, digits and '_.:-', "
            "starting with a letter or digit"
        )
    return name


def grouped_id(job_id: str, group: str) -> str:
    """The id of a job of ``group``.

    >>> grouped_id("01JD8X3W5K9T2B7Q4R6M0N1P2S", "tenant-42")
    '01JD8X3W5K9T2B7Q4R6M0N1P2S~tenant-42'
    """
    return f"{job_id}{MARK}{validate(group)}"


def group_of(job_id: str) -> str | None:
    """The group a job id names, or None (an ungrouped job, or a tail that is no group name).

    >>> group_of("01JD8X3W5K9T2B7Q4R6M0N1P2S~tenant-42"), group_of("order-42")
    ('tenant-42', None)
    """
    head, sep, tail = job_id.rpartition(MARK)
    if not sep or not head or not _GROUP.match(tail):
        return None
    return tail


def fair_order[T](items: list[T], group: dict[T, str | None]) -> list[T]:
    """``items`` interleaved round-robin across their groups, each group's own order kept.

    Groups take turns in the order of their first item; ungrouped items are
    one group of their own. Within the first ``G`` items (``G`` groups) every
    group has one, which is the fairness a claimer's walk of a page gives.

    >>> fair_order(["a1", "a2", "a3", "b1", "c1"], {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": None})
    ['a1', 'b1', 'c1', 'a2', 'a3']
    """
    lanes: dict[str | None, list[T]] = {}
    for item in items:
        lanes.setdefault(group.get(item), []).append(item)
    if len(lanes) <= 1:
        return items
    ordered: list[T] = []
    queues = list(lanes.values())
    depth = 0
    while len(ordered) < len(items):
        for lane in queues:
            if depth < len(lane):
                ordered.append(lane[depth])
        depth += 1
    return ordered
