"""Queue depth at a bounded cost: how many jobs wait, run and lie dead, and how long the oldest waited.

``Pail.stats`` lists every prefix in full, ``done/`` included, which grows
without bound. The reaper publishes depth every minute, so it reads at most
``max_pages`` pages of ``queue/``, ``run/`` and ``dlq/`` each and never
``done/``: at most ``3 * max_pages`` LIST requests a run, whatever the
backlog. A prefix with more keys than that is reported as a lower bound
(``complete`` is False).

Pending and delayed are told apart, and the oldest pending age measured, as
``pail stats`` does (``pail.stats.waiting``, the one definition): a delayed
job (its due time still to come) is not pending. The age is on the server's
clock (the listing's ``Date`` minus the entry's ``LastModified``, or its due
time if later), like lease expiry: it is how long the job has waited in its
current pending entry, so a job requeued after a failed attempt counts from
its requeue.

Given the visibility timeout, it also counts the **live** leases: those
written within the timeout (plus the one-second resolution of ``Date``). A
worker renews its lease every third of the timeout, so a live lease is one a
worker holds; an older one is a worker that died, or a job waiting out a
retry backoff (its owner stopped renewing when it decided the retry). Only
live leases mean a worker is running.
"""

from __future__ import annotations

from dataclasses import dataclass

from pail.keys import DLQ, QUEUE, RUN, Keys
from pail.protocol.reaper import CLOCK_RESOLUTION
from pail.stats import waiting
from pail.store.base import Store
from pail.store.listing import pages

DEFAULT_MAX_PAGES = 10
PAGE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class Depth:
    """Job counts per state at one moment; lower bounds unless ``complete``."""

    pending: int
    running: int
    dead_lettered: int
    oldest_pending_age: float | None
    """Seconds the oldest pending entry has waited, by the server's clock; None when none wait."""
    complete: bool = True
    live: int | None = None
    """Leases renewed within the visibility timeout (workers at work); None if not measured."""
    delayed: int = 0
    """Entries whose due time is still to come: not pending yet (``pail.stats.waiting``)."""

    @property
    def working(self) -> int:
        """Leases held by a live worker: ``live`` when measured, else every lease (``running``)."""
        return self.running if self.live is None else self.live

    def to_json(self) -> dict[str, object]:
        return {
            "pending": self.pending,
            "delayed": self.delayed,
            "running": self.running,
            "live_leases": self.live,
            "dead_lettered": self.dead_lettered,
            "oldest_pending_age": self.oldest_pending_age,
            "complete": self.complete,
        }


@dataclass(frozen=True, slots=True)
class _Count:
    count: int
    complete: bool
    oldest_age: float | None
    younger: int
    """How many were written at most ``live_within`` seconds ago."""
    delayed: int = 0
    """Of ``queue/``: entries not due yet, not counted in ``count``."""


def measure_depth(
    store: Store,
    keys: Keys,
    *,
    max_pages: int = DEFAULT_MAX_PAGES,
    page_size: int = PAGE_SIZE,
    visibility_timeout: float | None = None,
) -> Depth:
    """Count pending, running and dead-lettered jobs, reading at most ``max_pages`` pages of each.

    With ``visibility_timeout``, also count the live leases (``Depth.live``).

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> _ = queue.enqueue({"n": 1})
    >>> depth = measure_depth(queue.store, queue.keys)
    >>> depth.pending, depth.running, depth.dead_lettered, depth.complete
    (1, 0, 0, True)
    """
    live_within = None if visibility_timeout is None else visibility_timeout + CLOCK_RESOLUTION
    pending = _count(store, keys, QUEUE, max_pages, page_size)
    running = _count(store, keys, RUN, max_pages, page_size, live_within=live_within)
    dead = _count(store, keys, DLQ, max_pages, page_size)
    return Depth(
        pending=pending.count,
        running=running.count,
        dead_lettered=dead.count,
        oldest_pending_age=pending.oldest_age,
        complete=pending.complete and running.complete and dead.complete,
        live=None if live_within is None else running.younger,
        delayed=pending.delayed,
    )


def _count(
    store: Store,
    keys: Keys,
    state: str,
    max_pages: int,
    page_size: int,
    *,
    live_within: float | None = None,
) -> _Count:
    count = younger = delayed = 0
    oldest: float | None = None
    complete = False
    for page in pages(store, keys.prefix(state), max_keys=page_size, max_pages=max_pages):
        complete = page.next_token is None
        for item in page.items:
            if keys.entry_id(item.key, state) is None:
                continue  # a console "folder" or a nested key: not a job
            since = item.last_modified
            if state == QUEUE:
                entry = waiting(keys, item, page.server_time)
                if entry is None or entry.since is None:
                    delayed += entry is not None
                    continue  # not due yet: not pending, as pail stats counts it
                since = entry.since
            count += 1
            written = (page.server_time - item.last_modified).total_seconds()
            younger += live_within is not None and written <= live_within
            age = max(0.0, (page.server_time - since).total_seconds())
            oldest = age if oldest is None else max(oldest, age)
    return _Count(count, complete, oldest, younger, delayed)
