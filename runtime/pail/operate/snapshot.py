"""One bounded read of a queue, and its census: counts by state, oldest pending, finishes.

``take_snapshot`` lists each of the queue's four state prefixes, at most
``max_pages`` pages of 1,000 keys each (``4 * max_pages`` LIST requests),
and keeps what it saw. Everything else a dashboard shows of the queue (the
counts, the running jobs, the recent failures, the throughput chart) is
derived from it, so one refresh of a queue costs those LISTs plus a GET for
each job body it shows that it has not read before (``Reader`` caches by
ETag) and a HEAD for each small ``done/`` object it has not classified before.

Counts are exact when the listing reached the end of the prefix, and lower
bounds otherwise (``Count.exact``). Ages are judged by the server's clock: the
listing's ``Date`` minus the object's ``LastModified``, as lease expiry is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pail.codec import OUTCOME_CANCELLED, OUTCOME_DEAD, OUTCOME_SUCCEEDED
from pail.ids import ulid_time
from pail.keys import DLQ, DONE, QUEUE, RUN, WAIT, Keys
from pail.operate.objects import Budget, JobKind, Reader, job_id_of
from pail.stats import STATES, waiting
from pail.store.base import ObjectInfo, Store
from pail.store.listing import pages

PAGE_SIZE = 1000
DEFAULT_MAX_PAGES = 1
DEFAULT_HEAD_BUDGET = 100
RECENT_HOURS = 24
"""When ``done/`` has more keys than the snapshot reads, the throughput chart
reads one more page starting at the ids of jobs enqueued this many hours ago."""


@dataclass(frozen=True, slots=True)
class Count:
    """A number of objects, and whether it is exact or a lower bound."""

    value: int
    exact: bool = True

    def __str__(self) -> str:
        return str(self.value) if self.exact else f"≥{self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"count": self.value, "exact": self.exact}


@dataclass(frozen=True, slots=True)
class Scan:
    """What a bounded listing of one prefix returned."""

    prefix: str
    items: tuple[ObjectInfo, ...]
    complete: bool
    server_time: datetime


def scan(store: Store, prefix: str, *, max_pages: int, page_size: int = PAGE_SIZE) -> Scan:
    """List at most ``max_pages`` pages of ``prefix``."""
    items: list[ObjectInfo] = []
    server_time: datetime | None = None
    complete = False
    for page in pages(store, prefix, max_keys=page_size, max_pages=max(1, max_pages)):
        items.extend(page.items)
        server_time = server_time or page.server_time
        complete = page.next_token is None
    assert server_time is not None  # at least one page was listed
    return Scan(prefix, tuple(items), complete, server_time)


@dataclass(frozen=True, slots=True)
class Finish:
    """A job that ended: when (the terminal object's LastModified) and how."""

    at: datetime
    outcome: str


@dataclass(frozen=True, slots=True)
class Census:
    """A queue's counts by state at one moment, from one snapshot."""

    pending: Count
    delayed: Count
    waiting: Count
    """Jobs waiting for their dependencies (``wait/``)."""
    running: Count
    done: Count
    failed: Count
    """Dead letters (``dlq/``), named as ``pail stats`` names them (``pail.stats.STATES``)."""
    cancelled: Count
    foreign: Count
    oldest_pending_age: float | None
    """Seconds the oldest claimable entry has waited (server clock); None when none waits."""

    def of(self, state: str) -> Count:
        """The count of ``state``, one of ``pail.stats.STATES``."""
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}: one of {', '.join(STATES)}")
        count: Count = getattr(self, state)
        return count

    def to_json(self) -> dict[str, Any]:
        counts = {name: getattr(self, name).to_json() for name in (*STATES, "foreign")}
        return {**counts, "oldest_pending_age": self.oldest_pending_age}


@dataclass
class Snapshot:
    """One bounded read of a queue's four prefixes, with what was derived from it."""

    keys: Keys
    queue: Scan
    run: Scan
    done: Scan
    dlq: Scan
    census: Census
    finishes: list[Finish] = field(default_factory=list)
    finishes_note: str = ""

    @property
    def server_time(self) -> datetime:
        return self.queue.server_time

    def scan_of(self, prefix: str) -> Scan:
        return {QUEUE: self.queue, RUN: self.run, DONE: self.done, DLQ: self.dlq}[prefix]


def take_snapshot(
    store: Store,
    keys: Keys,
    reader: Reader,
    *,
    max_pages: int = DEFAULT_MAX_PAGES,
    head_budget: int = DEFAULT_HEAD_BUDGET,
    page_size: int = PAGE_SIZE,
) -> Snapshot:
    """List the queue's prefixes (bounded) and count what they hold.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> _ = queue.enqueue({"n": 1})
    >>> snap = take_snapshot(queue.store, queue.keys, Reader(queue.store))
    >>> str(snap.census.pending), str(snap.census.done)
    ('1', '0')
    """
    scans = {
        p: scan(store, keys.prefix(p), max_pages=max_pages, page_size=page_size)
        for p in (QUEUE, RUN, DONE, DLQ, WAIT)
    }
    budget = Budget(head_budget)
    census, finishes = _count(keys, scans, reader, budget)
    snapshot = Snapshot(keys, scans[QUEUE], scans[RUN], scans[DONE], scans[DLQ], census)
    snapshot.finishes = finishes
    if scans[DONE].complete:
        snapshot.finishes_note = f"from all {len(scans[DONE].items)} finished jobs"
    else:
        snapshot.finishes, snapshot.finishes_note = _recent_finishes(
            store, keys, scans, reader, budget, finishes
        )
    return snapshot


def _count(
    keys: Keys, scans: dict[str, Scan], reader: Reader, budget: Budget
) -> tuple[Census, list[Finish]]:
    queue, run, done, dlq = scans[QUEUE], scans[RUN], scans[DONE], scans[DLQ]
    now = queue.server_time
    pending = delayed = foreign = 0
    oldest: float | None = None
    for item in queue.items:
        entry = waiting(keys, item, now)  # the one definition, shared with pail stats
        if entry is None:
            foreign += 1
            continue
        if entry.since is None:
            delayed += 1
            continue
        pending += 1
        age = max(0.0, (now - entry.since).total_seconds())
        oldest = age if oldest is None else max(oldest, age)
    running = sum(1 for item in run.items if job_id_of(keys, item.key) is not None)
    held = scans[WAIT]
    parked = sum(1 for item in held.items if keys.entry_id(item.key, WAIT) is not None)
    foreign += len(held.items) - parked
    dead = sum(1 for item in dlq.items if job_id_of(keys, item.key) is not None)
    foreign += (len(run.items) - running) + (len(dlq.items) - dead)
    succeeded = cancelled = unknown = 0
    finishes: list[Finish] = []
    for item in done.items:
        if job_id_of(keys, item.key) is None:
            foreign += 1
            continue
        outcome = reader.outcome(item, budget=budget)
        if outcome is None:
            unknown += 1
        elif outcome == OUTCOME_CANCELLED:
            cancelled += 1
            finishes.append(Finish(item.last_modified, outcome))
        elif outcome == OUTCOME_SUCCEEDED:
            succeeded += 1
            finishes.append(Finish(item.last_modified, outcome))
    finishes += [
        Finish(item.last_modified, OUTCOME_DEAD)
        for item in dlq.items
        if job_id_of(keys, item.key) is not None
    ]
    all_listed = all(s.complete for s in scans.values())
    census = Census(
        pending=Count(pending, queue.complete),
        delayed=Count(delayed, queue.complete),
        waiting=Count(parked, held.complete),
        running=Count(running, run.complete),
        done=Count(succeeded, done.complete and unknown == 0),
        failed=Count(dead, dlq.complete),
        cancelled=Count(cancelled, done.complete and unknown == 0),
        foreign=Count(foreign, all_listed),
        oldest_pending_age=oldest,
    )
    return census, finishes


def ulid_floor(moment: datetime) -> str:
    """The first 10 characters of every ULID made at or after ``moment`` sort at or after this.

    >>> from datetime import UTC
    >>> ulid_floor(datetime(2025, 1, 1, tzinfo=UTC))
    '01JGFJJZ00'
    """
    millis = max(0, int(moment.timestamp() * 1000))
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    chars = []
    for _ in range(10):
        millis, digit = divmod(millis, 32)
        chars.append(alphabet[digit])
    return "".join(reversed(chars))


def _recent_finishes(
    store: Store,
    keys: Keys,
    scans: dict[str, Scan],
    reader: Reader,
    budget: Budget,
    seen: list[Finish],
) -> tuple[list[Finish], str]:
    """``done/`` was cut short: read one more page, of jobs enqueued in the last day."""
    if not store.ordered_listing:
        return seen, f"from the first {len(scans[DONE].items)} finished jobs listed (a lower bound)"
    now = scans[DONE].server_time
    start = keys.prefix(DONE) + ulid_floor(now - timedelta(hours=RECENT_HOURS))
    page = store.list(keys.prefix(DONE), max_keys=PAGE_SIZE, start_after=start)
    finishes = [f for f in seen if f.outcome == OUTCOME_DEAD]
    for item in page.items:
        if job_id_of(keys, item.key) is None:
            continue
        outcome = reader.outcome(item, budget=budget)
        if outcome in (OUTCOME_SUCCEEDED, OUTCOME_CANCELLED):
            finishes.append(Finish(item.last_modified, outcome))
    more = " (a lower bound)" if page.next_token is not None else ""
    return finishes, f"from jobs enqueued in the last {RECENT_HOURS} h{more}"


def enqueued_at(job_id: str | None) -> datetime | None:
    """When a job was enqueued, from its ULID id (None for other ids, and never an error)."""
    if not job_id:
        return None
    try:
        return ulid_time(job_id)
    except ValueError:  # 26 base32 characters whose time overflows: not a ULID after all
        return None


KIND_OF_PREFIX = {
    QUEUE: JobKind.PENDING,
    RUN: JobKind.RUNNING,
    DONE: JobKind.DONE,
    DLQ: JobKind.DEAD,
}
