"""Purge a queue: cancel every pending or waiting job, and never touch a running one.

Each pending entry goes through the cancel transition
(``pail.protocol.cancel.cancel_entry``, ``docs/protocol.md`` "Cancel"), so a
purged job ends in a terminal state, ``cancelled``, like any cancelled job:
"every enqueued job ends in a terminal state" keeps holding, and ``status``
and ``result`` say what happened to it. The transition starts from the entry
as read, under ``If-Match``: a job claimed after the listing (its entry
deleted or about to be) is skipped, never followed into ``run/``.

Per job: GET the entry, PUT it back marked cancelled (``If-Match``), PUT the
``cancelled`` marker (create-only), DELETE the entry (``If-Match``): 4
requests; a delayed entry costs 3 (GET, marker, DELETE). Plus one LIST per
1,000 entries. A crash part-way leaves every job either untouched (still
pending: purge again), or cancelled, or marked cancelled in its entry (the
claim that reads it finishes the cancellation and never runs it).

Waiting jobs (``wait/``, ``docs/dependencies.md``) are purged first, each as
``Pail.cancel`` cancels one (``dependencies.end``): the ``cancelled`` marker,
its own dependents told (so they end cancelled too), its record deleted: 3
requests (GET, PUT, DELETE) plus its dependents' tells, and one LIST of
``wait/`` per 1,000 (one LIST for a queue with none). First, so that a job
promoted while the purge runs is an entry the walk of ``queue/`` still meets.
Foreign bytes under ``wait/`` are reported and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pail.codec import OUTCOME_CANCELLED
from pail.errors import DecodeError
from pail.keys import QUEUE, WAIT, Keys
from pail.operate.objects import due_of, job_id_of
from pail.protocol import cancel, dependencies
from pail.protocol.writes import WriteStats
from pail.store.base import Store
from pail.store.listing import pages

PAGE_SIZE = 1000


@dataclass
class PurgeReport:
    """What a purge did. ``complete`` is False when it stopped at ``limit``."""

    cancelled: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Jobs that left the queue meanwhile (claimed, or ended): not touched."""
    foreign: list[str] = field(default_factory=list)
    """Keys under ``queue/`` or ``wait/`` that are not jobs (folder markers, foreign bytes): left alone."""
    waiting: list[str] = field(default_factory=list)
    """Those of ``cancelled`` that were waiting for their dependencies."""
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "cancelled": self.cancelled,
            "skipped": self.skipped,
            "foreign": self.foreign,
            "waiting": self.waiting,
            "complete": self.complete,
        }


def purge(
    store: Store, keys: Keys, *, limit: int | None = None, stats: WriteStats | None = None
) -> PurgeReport:
    """Cancel every waiting, pending and delayed job of the queue, at most ``limit``.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> job_id = queue.enqueue({"n": 1})
    >>> purge(queue.store, queue.keys).cancelled == [job_id], queue.status(job_id).state.value
    (True, 'cancelled')
    """
    report = PurgeReport()
    if not _purge_waiting(store, keys, limit, stats, report):
        return report
    # by_key: each cancellation deletes an entry, so each next page starts
    # after the last key looked at (directory buckets: continuation tokens).
    for page in pages(store, keys.prefix(QUEUE), max_keys=PAGE_SIZE, by_key=True):
        for info in page.items:
            if limit is not None and len(report.cancelled) >= limit:
                report.complete = False
                return report
            job_id = job_id_of(keys, info.key)
            if job_id is None:
                report.foreign.append(info.key)
                continue
            # In a sharded queue, the keys of the shard the entry is in.
            here = keys.of_key(info.key, QUEUE)
            if _purge_one(store, here, job_id, info.key, info.etag, stats):
                report.cancelled.append(job_id)
            else:
                report.skipped.append(job_id)
    return report


def _purge_one(
    store: Store, keys: Keys, job_id: str, key: str, etag: str, stats: WriteStats | None
) -> bool:
    if due_of(keys, key) is not None:
        # A delayed entry: nothing claims it before it is promoted, and a
        # promotion's claim finds the marker (claim step 4) and drops it.
        return cancel.cancel_delayed(store, keys, job_id, key, etag, stats)
    entry = store.get(key)
    if entry is None:
        return False  # claimed (or cancelled) since the listing
    return bool(cancel.cancel_entry(store, keys, job_id, entry, stats=stats))


def _purge_waiting(
    store: Store, keys: Keys, limit: int | None, stats: WriteStats | None, report: PurgeReport
) -> bool:
    """Cancel the waiting jobs into ``report``; False if it stopped at ``limit``."""
    keys = dependencies.unpinned(keys)  # as the reaper's pass: every shard's records
    for page in pages(store, keys.prefix(WAIT), max_keys=PAGE_SIZE, by_key=True):
        for info in page.items:
            if limit is not None and len(report.cancelled) >= limit:
                report.complete = False
                return False
            job_id = keys.entry_id(info.key, WAIT)
            if job_id is None:
                report.foreign.append(info.key)
                continue
            current = store.get(info.key)
            if current is None:
                report.skipped.append(job_id)  # promoted or ended since the listing
                continue
            try:
                record = dependencies.WaitingJob.decode(current.body, job_id)
            except DecodeError:
                report.foreign.append(info.key)  # as cancel: logged by status, left alone
                continue
            here = keys.of_key(info.key, WAIT)
            if dependencies.end(
                store, here, record, current.etag, OUTCOME_CANCELLED, None, stats=stats
            ):
                report.cancelled.append(job_id)
                report.waiting.append(job_id)
            else:
                report.skipped.append(job_id)
    return True
