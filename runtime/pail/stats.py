"""Counting a queue's jobs by state: ``Pail.stats``, and the one definition every count uses.

**One definition.** ``pail stats`` (this module, exact), ``pail queues`` and
the dashboard (``pail.operate.snapshot``, bounded) and the reaper's metrics
(``pail.depth``, bounded) count the same states under the same names
(``STATES``): a job is in exactly one of them. ``pending`` is a job a worker
could claim now; ``delayed`` one whose due time is still to come (not
pending, not yet); ``waiting`` one whose dependencies have not all
succeeded (``wait/``, ``pail.protocol.dependencies``); ``done`` a success; ``failed`` a dead letter (``dlq/``);
``cancelled`` a cancelled job. How one ``queue/`` entry counts, and since when
it has waited, is ``waiting``: the server's clock, the entry's
``LastModified`` (or its due time, if later), as pailq 0.1.1 measured it.

**``Stats``** is pailq 0.1.1's ``NamedTuple``: it unpacks to its five
fields, ``(pending, running, done, failed, oldest_pending)`` with
``oldest_pending`` an **age** (``timedelta``, None when nothing is pending),
so ``pail.stats() == (0, 0, 0, 0, None)`` on an empty queue. pail's counts
beyond 0.1.1's are attributes: ``delayed``, ``waiting``, ``cancelled``, and
``oldest_pending_at`` (when the oldest pending job started waiting).

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
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from pail.codec import META_OUTCOME, OUTCOME_CANCELLED, might_be_marker
from pail.keys import DLQ, DONE, QUEUE, RUN, WAIT, Keys
from pail.protocol import delay
from pail.store.base import ObjectInfo, Store
from pail.store.listing import pages

STATES: tuple[str, ...] = (
    "pending",
    "delayed",
    "waiting",
    "running",
    "done",
    "failed",
    "cancelled",
)
"""Every state a count is kept of, in the order every table shows them (``pail stats``,
``pail queues``, the dashboard), under these names."""
OLDEST_PENDING = "oldest pending"
"""The column of the oldest pending job's age, after the states."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """How one ``queue/`` entry counts: pending since ``since``, or delayed (``since`` None)."""

    since: datetime | None

    @property
    def delayed(self) -> bool:
        return self.since is None


def waiting(keys: Keys, item: ObjectInfo, now: datetime) -> Waiting | None:
    """How the ``queue/`` entry ``item`` counts at server time ``now``; None if it names no job.

    Delayed while its due time is to come; else pending since its
    ``LastModified``, or its due time if that is later (a delayed job waits
    from when it became due; a high-priority entry's due time is in the past).
    """
    if keys.entry_id(item.key, QUEUE) is None:
        return None
    parsed = delay.parse(keys, item.key)
    if parsed is None:
        return Waiting(item.last_modified)
    due = datetime.fromtimestamp(parsed[0] / 1000, UTC)
    if due > now:
        return Waiting(None)
    return Waiting(max(item.last_modified, due))


class _Counts(NamedTuple):
    pending: int
    running: int
    done: int
    failed: int
    oldest_pending: timedelta | None


class Stats(_Counts):
    """Counts per state: pailq 0.1.1's five-field tuple, with pail's extra counts as attributes.

    ``pending`` counts the jobs a worker could claim now (``delayed`` the ones
    whose due time is to come); ``done`` successes only (a cancelled job is in
    ``cancelled``, a dead-lettered one in ``failed``). ``oldest_pending`` is the
    age of the longest-waiting pending job, ``oldest_pending_at`` the moment
    it started waiting (both on the server's clock; None when none waits).

    >>> stats = Stats(1, 0, 2, 0, timedelta(seconds=5), delayed=3)
    >>> pending, running, done, failed, age = stats
    >>> (pending, age.total_seconds(), stats.delayed, stats == (1, 0, 2, 0, timedelta(seconds=5)))
    (1, 5.0, 3, True)
    """

    delayed: int
    cancelled: int
    oldest_pending_at: datetime | None
    waiting: int

    def __new__(
        cls,
        pending: int,
        running: int,
        done: int,
        failed: int,
        oldest_pending: timedelta | None,
        *,
        delayed: int = 0,
        cancelled: int = 0,
        oldest_pending_at: datetime | None = None,
        waiting: int = 0,
    ) -> Stats:
        self = super().__new__(cls, pending, running, done, failed, oldest_pending)
        object.__setattr__(self, "delayed", delayed)
        object.__setattr__(self, "waiting", waiting)
        object.__setattr__(self, "cancelled", cancelled)
        object.__setattr__(self, "oldest_pending_at", oldest_pending_at)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Stats is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        return (
            f"Stats(pending={self.pending}, running={self.running}, done={self.done}, "
            f"failed={self.failed}, oldest_pending={self.oldest_pending!r}, "
            f"delayed={self.delayed}, waiting={self.waiting}, cancelled={self.cancelled}, "
            f"oldest_pending_at={self.oldest_pending_at!r})"
        )

    def of(self, state: str) -> int:
        """The count of ``state``, one of ``STATES`` (``count`` stays the tuple's own)."""
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}: one of {', '.join(STATES)}")
        value: int = getattr(self, state)
        return value

    def to_json(self) -> dict[str, Any]:
        """The counts under ``STATES``' names, the age in seconds and the moment as ISO 8601."""
        age = self.oldest_pending
        since = self.oldest_pending_at
        return {
            **{state: self.of(state) for state in STATES},
            "oldest_pending_age": None if age is None else age.total_seconds(),
            "oldest_pending_at": since.isoformat() if since else None,
        }


def count_jobs(store: Store, keys: Keys) -> Stats:
    """The ``Stats`` of the queue ``keys`` names.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> _ = queue.enqueue({"n": 1}, delay=60)
    >>> stats = count_jobs(queue.store, queue.keys)
    >>> stats.pending, stats.delayed, stats.oldest_pending is None
    (0, 1, True)
    >>> count_jobs(MemoryStore("jobs"), queue.keys) == (0, 0, 0, 0, None)
    True
    """
    done_infos = {job_id: info for job_id, info in entries(store, keys, DONE)}
    failed = set(_ids(store, keys, DLQ))
    pending = delayed = 0
    queued: set[str] = set()
    oldest: datetime | None = None
    now: datetime | None = None
    for page in pages(store, keys.prefix(QUEUE)):
        now = page.server_time
        for item in page.items:
            entry = waiting(keys, item, page.server_time)
            if entry is None:
                continue
            parsed = delay.parse(keys, item.key)
            job_id = parsed[1] if parsed else keys.job_id(item.key)
            queued.add(job_id)
            if job_id in done_infos:
                # An entry beside an outcome is a late write that the claim
                # meeting it drops, not a pending job: done/ wins, as in status.
                continue
            if entry.since is None:
                delayed += 1
                continue
            pending += 1
            if oldest is None or entry.since < oldest:
                oldest = entry.since
    running_ids = set(_ids(store, keys, RUN))
    running = len(running_ids)
    # A waiting record beside another of the job's objects is one a promotion
    # or an end left behind (its repair removes it): the other one counts.
    waiting_jobs = sum(
        1
        for job_id in _ids(store, keys, WAIT)
        if job_id not in done_infos and job_id not in queued and job_id not in running_ids
    )
    done = cancelled = 0
    for job_id, info in done_infos.items():
        if job_id in failed:
            continue  # a dead-lettered job keeps a marker under done/: it counts as failed
        if might_be_marker(info.size) and _is_cancelled(store, info.key):
            cancelled += 1
        else:
            done += 1
    age = None
    if oldest is not None and now is not None:
        age = max(timedelta(0), now - oldest)
    return Stats(
        pending,
        running,
        done,
        len(failed),
        age,
        delayed=delayed,
        cancelled=cancelled,
        oldest_pending_at=oldest,
        waiting=waiting_jobs,
    )


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
