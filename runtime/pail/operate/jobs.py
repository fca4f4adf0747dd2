"""Jobs by state, with their age: ``pail jobs`` and the dashboard's tables.

A row is one object under a state prefix: its job id (None for a foreign
object), its state, how long ago the job was enqueued (from its ULID id) and
how long it has been in this state (the object's ``LastModified``, by the
server's clock). ``details`` adds what the body says (attempts, the holder of
a lease and its progress, the last error): one GET per row not read before.

Cost of ``list_jobs``: one LIST per 1,000 keys scanned (at most
``max_pages``), plus for ``done``/``cancelled`` one HEAD per small result
not classified before, plus the detail GETs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pail.codec import OUTCOME_CANCELLED, OUTCOME_SUCCEEDED
from pail.keys import DLQ, DONE, QUEUE, RUN, WAIT, Keys
from pail.operate.objects import (
    FOREIGN,
    PREFIX_OF,
    Budget,
    JobDetail,
    JobKind,
    Reader,
    due_of,
    job_id_of,
)
from pail.operate.snapshot import PAGE_SIZE, Scan, enqueued_at
from pail.protocol.delay import HIGH_DUE
from pail.stats import waiting
from pail.store.base import ObjectInfo, Store
from pail.store.listing import pages

DEFAULT_LIMIT = 50
DEFAULT_MAX_PAGES = 5


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job (or foreign object) in a listing."""

    key: str
    job_id: str | None
    state: str
    etag: str
    size: int
    last_modified: datetime
    in_state: float
    """Seconds since the object was last written (a lease: since its last renewal)."""
    age: float | None
    """Seconds since the job was enqueued (from its ULID id); None for other ids."""
    due: datetime | None = None
    detail: JobDetail | None = None

    @property
    def foreign(self) -> bool:
        return self.job_id is None

    @property
    def due_text(self) -> str | None:
        """The due time as people read it, or None for a row without one.

        A high-priority entry is spelled as due at the epoch (so that it
        lists first), which is a key's trick, not a time: it reads as what it is.

        >>> from pail.protocol.delay import HIGH_DUE
        >>> JobRow("k", "J", "pending", "e", 1, HIGH_DUE, 0.0, None, due=HIGH_DUE).due_text
        'high priority: first in line'
        """
        if self.due is None:
            return None
        if self.due == HIGH_DUE:
            return "high priority: first in line"
        return f"due {self.due.strftime('%Y-%m-%d %H:%M:%S UTC')}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "key": self.key,
            "state": self.state,
            "age": self.age,
            "in_state": self.in_state,
            "last_modified": self.last_modified.isoformat(),
            "due": self.due.isoformat() if self.due else None,
            "size": self.size,
            "detail": self.detail.to_json() if self.detail else None,
        }


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of rows; ``more`` when the listing stopped before the end of the prefix."""

    kind: JobKind
    rows: tuple[JobRow, ...]
    more: bool
    next_after: str | None
    """Pass as ``after`` for the next page (general purpose buckets)."""
    server_time: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.kind.value,
            "jobs": [row.to_json() for row in self.rows],
            "more": self.more,
            "next_after": self.next_after,
        }


def row_for(
    keys: Keys, info: ObjectInfo, state: str, now: datetime, detail: JobDetail | None = None
) -> JobRow:
    """A row for ``info`` as seen at server time ``now``."""
    job_id = job_id_of(keys, info.key)
    born = enqueued_at(job_id)
    return JobRow(
        key=info.key,
        job_id=job_id,
        state=state if job_id is not None else FOREIGN,
        etag=info.etag,
        size=info.size,
        last_modified=info.last_modified,
        in_state=max(0.0, (now - info.last_modified).total_seconds()),
        age=max(0.0, (now - born).total_seconds()) if born else None,
        due=due_of(keys, info.key),
        detail=detail,
    )


def classify(
    keys: Keys, info: ObjectInfo, prefix: str, now: datetime, reader: Reader, budget: Budget
) -> str | None:
    """The state of the object ``info`` under ``prefix``: a ``JobKind`` value, ``foreign``,
    or None for a ``done/`` object that is a dead marker, or unknown within ``budget``."""
    if job_id_of(keys, info.key) is None:
        return FOREIGN
    if prefix == QUEUE:
        entry = waiting(keys, info, now)  # the one definition, shared with pail stats
        return JobKind.DELAYED if entry is not None and entry.delayed else JobKind.PENDING
    if prefix == RUN:
        return JobKind.RUNNING
    if prefix == DLQ:
        return JobKind.DEAD
    if prefix == WAIT:
        return JobKind.WAITING
    outcome = reader.outcome(info, budget=budget)
    if outcome == OUTCOME_SUCCEEDED:
        return JobKind.DONE
    if outcome == OUTCOME_CANCELLED:
        return JobKind.CANCELLED
    return None


def _wanted(kind: JobKind, state: str) -> bool:
    # Foreign objects are listed with the main state of their prefix, so that
    # every object an operator might wonder about shows up somewhere.
    if state == FOREIGN:
        return kind in (
            JobKind.PENDING,
            JobKind.WAITING,
            JobKind.RUNNING,
            JobKind.DONE,
            JobKind.DEAD,
        )
    return state == kind


def rows_from_scan(
    keys: Keys,
    scan: Scan,
    kind: JobKind,
    reader: Reader,
    *,
    limit: int,
    details: bool = True,
    head_budget: int = 200,
) -> tuple[list[JobRow], bool]:
    """The first ``limit`` rows of ``kind`` in an existing scan; True if more were left out."""
    budget = Budget(head_budget)
    rows: list[JobRow] = []
    for info in scan.items:
        state = classify(
            keys, info, scan.prefix.removeprefix(keys.root), scan.server_time, reader, budget
        )
        if state is None or not _wanted(kind, state):
            continue
        if len(rows) >= limit:
            return rows, True
        rows.append(_with_detail(keys, info, state, scan, reader, details))
    return rows, not scan.complete or budget.exhausted


def _with_detail(
    keys: Keys, info: ObjectInfo, state: str, scan: Scan, reader: Reader, details: bool
) -> JobRow:
    prefix = scan.prefix.removeprefix(keys.root)
    detail = None
    if details and prefix != DONE and state != FOREIGN:
        detail = reader.detail(keys, info, prefix)
    return row_for(keys, info, state, scan.server_time, detail)


def list_jobs(
    store: Store,
    keys: Keys,
    kind: JobKind,
    reader: Reader | None = None,
    *,
    limit: int = DEFAULT_LIMIT,
    after: str | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    details: bool = True,
) -> JobPage:
    """List up to ``limit`` jobs in state ``kind``, oldest id first (general purpose buckets).

    ``after`` is a key from a previous page's ``next_after``. Foreign objects
    are listed with ``pending``, ``waiting``, ``running``, ``done`` and ``dead`` (the main
    state of their prefix), as ``foreign``.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> job_id = queue.enqueue({"n": 1})
    >>> page = list_jobs(queue.store, queue.keys, JobKind.PENDING)
    >>> [row.job_id == job_id for row in page.rows], page.more
    ([True], False)
    """
    reader = reader or Reader(store)
    prefix = PREFIX_OF[kind]
    full = keys.prefix(prefix)
    budget = Budget(max(limit * 4, 100))
    rows: list[JobRow] = []
    last: str | None = None
    server_time: datetime | None = None
    listing = pages(store, full, max_keys=PAGE_SIZE, max_pages=max(1, max_pages), start_after=after)
    for page in listing:
        server_time = server_time or page.server_time
        scan = Scan(full, page.items, page.next_token is None, page.server_time)
        for info in page.items:
            state = classify(keys, info, prefix, page.server_time, reader, budget)
            if state is not None and _wanted(kind, state):
                if len(rows) >= limit:
                    return JobPage(kind, tuple(rows), True, last, server_time)
                rows.append(_with_detail(keys, info, state, scan, reader, details))
            last = info.key
        if page.next_token is None:
            more = budget.exhausted
            return JobPage(kind, tuple(rows), more, last if more else None, server_time)
    assert server_time is not None
    return JobPage(kind, tuple(rows), True, last, server_time)
