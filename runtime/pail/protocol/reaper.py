"""Reclaiming expired leases: the reaper's pass over ``run/``.

A lease is expired when the server's clock says so: the ``Date`` of the
listing response minus the object's ``LastModified`` exceeds the visibility
timeout (plus one second, for the one-second resolution of ``Date``). No
local clock takes part.

For each expired lease the reaper first rewrites it under ``If-Match`` on the
ETag it listed (the fence: the old owner's next renewal now fails, and a
lease renewed since the listing is left alone), then finishes whatever the
owner left undone, using the same idempotent steps the owner uses.

Each pass reads a bounded number of pages (``max_pages`` of ``page_size``
leases, plus the first page of ``run/``), so its cost per run is bounded
however many jobs are running. When ``run/`` holds more than one page, a pass
continues a walk from where the previous one stopped: the position is kept in
the bucket (``reap_cursor``), so a one-shot reaper in a fresh process
continues the walk too. With ``R`` leases under ``run/``, every lease is
looked at within ``ceil(R / (max_pages * page_size)) + 1`` passes.

Foreign bytes under ``run/`` never stop a pass. A lease that is not one
(not JSON, wrong types, too deep, a payload pail cannot write back such as
pailq 0.1.1's ``NaN``) is, once expired, fenced and quarantined: dead-lettered
with its raw bytes and the reason, unless the job is pending or ended
otherwise, when it is just dropped (logged). Keys that name no job (the
console's zero-byte "folders", nested keys) are passed by: a folder marker
silently, anything else counted as ``skipped`` and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pail.codec import (
    DYING,
    META_OUTCOME,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    RETRYING,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    raw_text,
)
from pail.errors import (
    AccessDeniedError,
    ConditionFailedError,
    DecodeError,
    PailError,
    PayloadError,
    StorageError,
)
from pail.ids import new_token
from pail.keys import RUN, Keys
from pail.protocol import dependencies, redrive, transitions
from pail.protocol.dependencies.repair import Repairer, RepairReport
from pail.protocol.limits import slots
from pail.protocol.limits.slots import RecoveryReport
from pail.protocol.reap_cursor import TOP, Position, ReapCursor
from pail.protocol.schedules.runner import Ticker, TickReport
from pail.protocol.settle import Policy
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ListPage, ObjectInfo, Store, StoredObject

log = logging.getLogger("pail")

CLOCK_RESOLUTION = 1.0
DEFAULT_PAGE_SIZE = 1000
DEFAULT_MAX_PAGES = 10


def passes_to_cover(
    leases: int, *, page_size: int = DEFAULT_PAGE_SIZE, max_pages: int = DEFAULT_MAX_PAGES
) -> int:
    """The most reaper passes it takes to look at each of ``leases`` leases, from any position.

    A pass reads ``max_pages * page_size`` leases from where the last one
    stopped; one more pass covers a walk that started mid-way and wrapped.

    >>> passes_to_cover(10_001), passes_to_cover(500), passes_to_cover(31, page_size=10, max_pages=2)
    (3, 2, 3)
    """
    per_pass = max_pages * page_size
    return -(-leases // per_pass) + 1


@dataclass
class ReapReport:
    """What one reaper pass saw and did."""

    scanned: int = 0
    expired: int = 0
    requeued: int = 0
    dead_lettered: int = 0
    cleaned: int = 0
    renewed: int = 0
    backing_off: int = 0
    quarantined: int = 0
    """Foreign leases dead-lettered with their raw bytes."""
    skipped: int = 0
    """Keys under ``run/`` that name no job (nested keys), passed by and logged."""
    complete_pass: bool = True
    """True when this pass started at the top of ``run/`` and reached its end."""
    requeued_ids: list[str] = field(default_factory=list)
    dead_lettered_ids: list[str] = field(default_factory=list)
    quarantined_ids: list[str] = field(default_factory=list)
    schedules: TickReport | None = None
    """What the pass's run of the schedules did (``pail.protocol.schedules``); None if it had none."""
    dependencies: RepairReport | None = None
    """What the pass's look at waiting jobs did (``pail.protocol.dependencies.repair``)."""
    slots: RecoveryReport | None = None
    """What the pass's recovery of concurrency slots did (``pail.protocol.limits``); None if none ran."""


class Reaper:
    """Reclaims expired leases of one queue, a bounded number of pages per pass."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        policy: Policy,
        *,
        stats: WriteStats | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        max_pages: int = DEFAULT_MAX_PAGES,
        ticker: Ticker | None = None,
        repairer: Repairer | None = None,
    ) -> None:
        self._store = store
        self._ticker = ticker
        self._keys = keys
        self._policy = policy
        self._stats = stats
        self._page_size = page_size
        self._max_pages = max_pages
        self._cursor = ReapCursor(store, keys, stats=stats)
        self._repairer = repairer
        self._seen: set[str] = set()
        """The job ids of the live leases the last pass listed (waiting jobs' dependencies)."""
        self._position: Position | None = None
        """Where this reaper's next pass starts; None until read from the bucket (first pass)."""

    def reap(self) -> ReapReport:
        """One pass: reclaim expired leases (``reclaim_leases``), then run the due schedule ticks.

        The ticks run after the leases, and a storage error in them is
        logged, never raised: the schedules never stop a reaper's pass.
        """
        report = self.reclaim_leases()
        if slots.RECOVERS:
            report.slots = self.recover_slots()
        report.schedules = self.run_schedules()
        report.dependencies = self.run_dependencies(report)
        return report

    def run_dependencies(self, leases: ReapReport) -> RepairReport | None:
        """The pass's look at waiting jobs' late dependencies (``pail.protocol.dependencies``).

        One LIST of ``wait/`` per pass, plus a HEAD per late dependency not
        yet met and not running; a storage error is logged, never raised.
        """
        if self._repairer is None:
            return None
        running = self._seen if leases.complete_pass else None
        try:
            return self._repairer.repair(running)
        except AccessDeniedError as exc:
            log.info("reaper: this process does not look at waiting jobs (%s)", exc)
            self._repairer = None
            return None
        except PailError as exc:
            log.warning("reaper: the waiting jobs could not be looked at this pass: %s", exc)
            return None

    def recover_slots(self) -> RecoveryReport | None:
        """Free the concurrency slots whose lease is gone (``limits.slots.recover``); never raises.

        After the leases: a lease this pass fenced frees its slot in the same
        pass. One LIST of ``_pail/slots/`` for a queue without limits.
        """
        try:
            return slots.recover(
                self._store,
                self._keys,
                visibility_timeout=self._policy.visibility_timeout,
                stats=self._stats,
            )
        except PailError as exc:
            log.warning("slot recovery failed, next pass retries: %s", exc)
            return None

    def run_schedules(self) -> TickReport | None:
        """The pass's schedules step: every due tick enqueued once (``pail.protocol.schedules``)."""
        if self._ticker is None:
            return None
        try:
            return self._ticker.tick()
        except AccessDeniedError as exc:
            # A process whose role may not read the schedules (a worker's own
            # reap pass): the deployed reaper runs them; say so once, not each pass.
            log.info("reaper: this process does not run the schedules (%s)", exc)
            self._ticker = None
            return None
        except PailError as exc:  # a storage error: the ticks stay due for the next pass
            log.warning("reaper: the schedules could not be listed this pass: %s", exc)
            return None

    def reclaim_leases(self) -> ReapReport:
        """The first page of ``run/``, then up to ``max_pages`` pages of the walk.

        A ``run/`` that fits in one page is covered whole, and the walk's
        position is never read or written. Otherwise the pass continues the
        walk from where the last one stopped (read from the bucket on this
        reaper's first such pass, then kept in memory), ``max_pages`` pages
        in all counting the first page when the walk is at the top.
        """
        report = ReapReport(complete_pass=False)
        self._seen = set()
        first = self._store.list(self._keys.prefix(RUN), max_keys=self._page_size)
        self._scan(first, report)
        if first.next_token is None:
            report.complete_pass = True
            return report
        start = self._position if self._position is not None else self._cursor.load()
        if start.at_top:  # the first page is the walk's first page
            position, pages = self._next(first), self._max_pages - 1
        else:
            position, pages = start, self._max_pages
        for _ in range(pages):
            page = self._list(position, start)
            self._scan(page, report)
            if page.next_token is None:
                # The end of run/: the walk starts from the top again.
                report.complete_pass = start.at_top
                position = TOP
                break
            position = self._next(page)
        self._position = position
        if position != start and not self._cursor.save(position):
            self._position = None  # another reaper moved it: read it again next time
        return report

    def _scan(self, page: ListPage, report: ReapReport) -> None:
        for item in page.items:
            job_id = self._keys.entry_id(item.key, RUN)
            if job_id is None:
                self._pass_by(item, report)
                continue
            report.scanned += 1
            age = (page.server_time - item.last_modified).total_seconds()
            if age <= self._policy.visibility_timeout + CLOCK_RESOLUTION:
                self._seen.add(job_id)  # alive: running (or just ended: the next pass sees it)
            else:
                report.expired += 1
                # A sharded queue's run/ holds every shard: act in this lease's own.
                self._reclaim(item, job_id, report, age, self._keys.of_key(item.key, RUN))

    def _list(self, position: Position, start: Position) -> ListPage:
        prefix = self._keys.prefix(RUN)
        try:
            return self._store.list(
                prefix,
                max_keys=self._page_size,
                start_after=position.after,
                continuation=position.token,
            )
        except StorageError:
            if position != start or start.at_top or position.token is None:
                raise
            # A stored continuation token the store no longer accepts: from the top.
            log.warning("reaper: its stored position was refused; starting from the top")
            return self._store.list(prefix, max_keys=self._page_size)

    def _next(self, page: ListPage) -> Position:
        if self._store.ordered_listing and page.items:
            return Position(after=page.items[-1].key)
        return Position(token=page.next_token)

    def _pass_by(self, item: ObjectInfo, report: ReapReport) -> None:
        """A key under ``run/`` that names no job: never a lease, never touched."""
        if item.key.endswith("/") and item.size == 0:
            return  # a "folder" the S3 console made
        report.skipped += 1
        log.warning("reaper: %s names no job (nested key); left alone", item.key)

    def _reclaim(
        self, item: ObjectInfo, job_id: str, report: ReapReport, age: float, keys: Keys
    ) -> None:
        current = self._store.get(item.key)
        if current is None or current.etag != item.etag:
            report.renewed += 1
            return
        raw: str | None = None
        try:
            fenced = LeaseRecord.decode(current.body, job_id).rewritten(reaped=True)
            body = fenced.encode()
        except (DecodeError, PayloadError) as exc:
            # Foreign bytes: fence them with a lease of our own that decides
            # their dead-letter, keeping the bytes and the reason.
            raw = raw_text(current.body)
            error = ErrorInfo.from_exception(exc)
            fenced = LeaseRecord(
                job_id,
                None,
                0,
                "reaper",
                new_token(),
                state=DYING,
                error=error,
                reaped=True,
                raw=raw,
            )
            body = fenced.encode()
            log.warning("reaper: %s is not a lease pail can act on: %s", item.key, exc)
        if fenced.state == RETRYING and age <= fenced.retry_after + CLOCK_RESOLUTION:
            report.backing_off += 1  # a retry backoff still running: not due yet
            return
        won = put_conditional(
            self._store,
            item.key,
            body,
            fenced.write,
            if_match=item.etag,
            stats=self._stats,
            reason="reap",
        )
        if won is None:
            report.renewed += 1
            return
        self._finish(fenced, won.etag, report, raw, keys)

    def _finish(
        self, record: LeaseRecord, etag: str, report: ReapReport, raw: str | None, keys: Keys
    ) -> None:
        job_id = record.job_id
        raw = raw if raw is not None else record.raw  # a claimer's quarantine, left half-done
        done = self._store.head(keys.done(job_id))
        if redrive.took_back(self._store, keys, job_id, record.redriven, done):
            done = None  # a piece of the death this life's redrive took back, now removed
        if done is not None:
            if done.metadata.get(META_OUTCOME) == OUTCOME_DEAD:
                # The marker is the decision to dead-letter, made by a DYING owner
                # or by a reaper (whose fenced lease stays RUNNING) that died
                # before the dlq/ record: finish it either way.
                error = record.error if record.state == DYING else _expired(record, final=True)
                transitions.dead_letter(
                    self._store, keys, record, etag, error=error, raw=raw, stats=self._stats
                )
            elif not record.then or dependencies.told(
                self._store,
                keys,
                job_id,
                record.then,
                done.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED),
                stats=self._stats,
            ):
                # Its dependents heard how it ended (the owner died before
                # telling them, or did): only now may its last record go.
                delete_if_unchanged(self._store, keys.run(job_id), etag)
            report.cleaned += 1
            return
        pending = self._store.get(keys.queue(job_id))
        if pending is not None and not self._take_claimed_entry(record, pending):
            # A retry was written before its lease was dropped: the job is pending already.
            if raw is not None:
                log.warning("reaper: dropping foreign lease of pending job %s: %.200s", job_id, raw)
            delete_if_unchanged(self._store, keys.run(job_id), etag)
            report.cleaned += 1
            return
        if record.state == DYING or self._policy.exhausted(record.attempts_used):
            error = record.error if record.state == DYING else _expired(record, final=True)
            ending = transitions.dead_letter(
                self._store, keys, record, etag, error=error, raw=raw, stats=self._stats
            )
            if ending is transitions.Ending.DEAD_LETTERED and raw is not None:
                report.quarantined += 1
                report.quarantined_ids.append(job_id)
            elif ending is transitions.Ending.DEAD_LETTERED:
                report.dead_lettered += 1
                report.dead_lettered_ids.append(job_id)
                log.warning("job %s dead-lettered by the reaper: %s", job_id, error)
            else:
                report.cleaned += 1
            return
        error = record.error if record.state == RETRYING else _expired(record, final=False)
        transitions.requeue(
            self._store,
            keys,
            record,
            etag,
            attempts=record.attempts_used,
            error=error,
            stats=self._stats,
        )
        report.requeued += 1
        report.requeued_ids.append(job_id)
        log.info("job %s requeued by the reaper after attempt %d", job_id, record.attempt)

    def _take_claimed_entry(self, record: LeaseRecord, pending: StoredObject) -> bool:
        """Take the pending entry this lease's claim read; False if it is a newer one.

        The claim that wrote the lease never deleted its entry (step 3). It may
        have died, or only stalled: a stalled claim would still delete it (the
        entry is unchanged, so its If-Match holds) after this reaper dropped
        the lease, leaving the job with no object at all. So the reaper does
        step 3 itself, and then ends the expired attempt like any other. An
        entry with as many attempts as the lease has used is a retry already
        written (for a release before the handler started, one fewer than the
        lease's attempt: it was not spent), and one of a later life
        (``redriven``) belongs to a redrive that came after this lease's claim
        read its entry: both are newer, and stay.
        """
        try:
            envelope = Envelope.decode(pending.body)
        except DecodeError:
            return False  # garbage under queue/: a claimer dead-letters it
        if envelope.cancelled:
            return False  # a cancelled entry is the job's end: a claim finishes it
        if (envelope.redriven, envelope.attempts) >= (record.redriven, record.attempts_used):
            # A newer entry: the job moved on past this lease (a retry written,
            # or a redrive started a later life while a stale lease lingered).
            return False
        try:
            self._store.delete(pending.key, if_match=pending.etag)
        except ConditionFailedError:
            # Gone: the stalled claim took it after all, and runs on a lease
            # that is fenced now; ours to end. Changed: a newer entry, pending.
            return self._store.head(pending.key) is None
        return True


def _expired(record: LeaseRecord, *, final: bool) -> ErrorInfo:
    tail = " and no retries are left" if final else ""
    return ErrorInfo(
        "LeaseExpired",
        f"worker {record.owner} stopped renewing its lease during attempt {record.attempt} "
        f"(crashed, killed or stalled){tail}",
        attempt=record.attempt,
    )
