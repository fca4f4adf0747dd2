"""Counting a queue's jobs by state: ``Pail.stats``.

It lists every prefix of the queue in full (``done/`` included, which grows
without bound: the reaper's bounded count is ``pail.depth``). Keys that name
no job, such as the zero-byte "folders" the S3 console makes, are not
counted, and neither is a pending entry beside an outcome (a late write the
next claim drops). A listing gives sizes, not metadata, so telling a cancelled job
from a success costs one HEAD per ``done/`` object of a marker's size that
is not dead-lettered; nothing else is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pail.codec import META_OUTCOME, OUTCOME_CANCELLED, might_be_marker
from pail.ids import ulid_time
from pail.keys import DLQ, DONE, QUEUE, RUN, Keys
from pail.protocol import delay
from pail.store.base import ObjectInfo, Store
from pail.store.listing import pages


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts per state, and when the oldest pending job started waiting.

    ``pending`` counts every pending entry; ``delayed`` is how many of them
    wait for a due time still to come. ``done`` counts successes only: a
    cancelled job is in ``cancelled``, a dead-lettered one in ``failed``.
    ``oldest_pending`` is when the longest-waiting pending job started
    waiting: its enqueue time, or for a delayed or high-priority job its due
    time if that is later. Jobs not due yet are not waiting.
    """

    pending: int
    running: int
    done: int
    failed: int
    oldest_pending: datetime | None
    delayed: int = 0
    cancelled: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": self.pending,
            "delayed": self.delayed,
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "oldest_pending": self.oldest_pending.isoformat() if self.oldest_pending else None,
        }


def count_jobs(store: Store, keys: Keys) -> Stats:
    """The ``Stats`` of the queue ``keys`` names.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> _ = queue.enqueue({"n": 1}, delay=60)
    >>> stats = count_jobs(queue.store, queue.keys)
    >>> stats.pending, stats.delayed, stats.oldest_pending is None
    (1, 1, True)
    """
    done_infos = {job_id: info for job_id, info in entries(store, keys, DONE)}
    failed = set(_ids(store, keys, DLQ))
    pending = delayed = 0
    oldest: datetime | None = None
    for page in pages(store, keys.prefix(QUEUE)):
        for item in page.items:
            job_id = keys.entry_id(item.key, QUEUE)
            if job_id is None:
                continue
            parsed = delay.parse(keys, item.key)
            if (parsed[1] if parsed else job_id) in done_infos:
                # An entry beside an outcome is a late write that the claim
                # meeting it drops, not a pending job: done/ wins, as in status.
                continue
            pending += 1
            since = _waiting_since(keys, item.key, page.server_time)
            if since is None:
                delayed += 1
            elif since is not _UNKNOWN and (oldest is None or since < oldest):
                oldest = since
    running = sum(1 for _ in _ids(store, keys, RUN))
    done = cancelled = 0
    for job_id, info in done_infos.items():
        if job_id in failed:
            continue  # a dead-lettered job keeps a marker under done/: it counts as failed
        if might_be_marker(info.size) and _is_cancelled(store, info.key):
            cancelled += 1
        else:
            done += 1
    return Stats(
        pending=pending,
        running=running,
        done=done,
        failed=len(failed),
        oldest_pending=oldest,
        delayed=delayed,
        cancelled=cancelled,
    )


_UNKNOWN = datetime.min.replace(tzinfo=UTC)
"""A pending entry whose id tells no time (not a ULID): pending, but of unknown age."""


def _waiting_since(keys: Keys, key: str, now: datetime) -> datetime | None:
    """When the entry at ``key`` started waiting; None if it is not due yet (``_UNKNOWN`` if unknown)."""
    parsed = delay.parse(keys, key)
    if parsed is None:
        return ulid_time(keys.job_id(key)) or _UNKNOWN
    due_ms, job_id = parsed
    due = datetime.fromtimestamp(due_ms / 1000, UTC)
    if due > now:
        return None
    enqueued = ulid_time(job_id)
    return max(due, enqueued) if enqueued is not None else due


def entries(store: Store, keys: Keys, state: str) -> Iterator[tuple[str, ObjectInfo]]:
    """``(job_id, info)`` of every key under ``state``'s prefix that names a job, in listing order."""
    for page in pages(store, keys.prefix(state)):
        for item in page.items:
            job_id = keys.entry_id(item.key, state)
            if job_id is not None:
                yield job_id, item


def _ids(store: Store, keys: Keys, state: str) -> Iterator[str]:
    for job_id, _ in entries(store, keys, state):
        yield job_id


def _is_cancelled(store: Store, key: str) -> bool:
    marker = store.head(key)
    return marker is not None and marker.metadata.get(META_OUTCOME) == OUTCOME_CANCELLED
