"""The tick runner: one pass over the schedules, enqueuing each due tick exactly once.

A pass is a step of the reaper's (``Reaper.reap``, so the deployed reaper
Lambda, ``pail reap --every`` and a worker's own reap pass all run it):

1. **LIST** ``_pail/schedules/`` (one request for up to 1,000 schedules).
   Its ``Date`` is the pass's time: the server's clock, so a scheduler
   whose own clock is off computes the same ticks as any other.
2. **GET** only the definitions whose ETag changed since this runner last
   read them (on a cold start, each once). A definition the runner knows,
   whose next tick is not due yet, costs nothing more: an idle pass is that
   one LIST, however many schedules there are.
3. For each due tick (the latest one after ``since``; up to ``catch_up``
   of them, oldest first, when a scheduler missed several), **enqueue** its
   job through the dedup mechanism (``pail.protocol.dedup``) under the key
   ``tick_key(name, tick)``: the tick's due time names its job, so two
   schedulers at once, a retried Lambda or a pass that crashed half-way and
   ran again all meet the same key record, and at most one job exists per
   tick. A pass that finds the record but no job (its writer crashed
   between the two writes) writes the job, as any keyed enqueue does.
4. **PUT** the definition ``If-Match`` the ETag it read, with ``last_tick``
   and ``last_job``: the next pass knows the tick is done without a
   request. Losing the condition (another scheduler did it, or the
   schedule was replaced meanwhile) costs nothing: the next pass reads it
   again.

A crash anywhere leaves either no key record (the tick is still due, the
next pass enqueues it), a record without its job (the next pass writes it),
or a job whose definition does not say so yet (the next pass meets the
record and only rewrites the definition). Foreign bytes under the prefix are
skipped with a logged reason (once per ETag), never raised.

Cost per tick: 2 PUTs (key record, job) and the definition's PUT; the next
pass reads nothing for it (the runner keeps the ETag its own PUT made).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pail.errors import DecodeError, PailError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol import dedup
from pail.protocol.schedules.definition import MAX_BYTES, Schedule, validate_name
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import ObjectInfo, Store
from pail.store.listing import pages

log = logging.getLogger("pail")


def tick_key(name: str, tick: datetime) -> str:
    """The dedup key of one tick of schedule ``name``: the tick's due time names its job.

    >>> from datetime import UTC
    >>> tick_key("nightly", datetime(2026, 1, 2, 2, 0, tzinfo=UTC))
    '_pail/schedules/nightly@2026-01-02T02:00:00Z'
    """
    return f"_pail/schedules/{name}@{tick.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def enqueue_tick(
    store: Store,
    keys: Keys,
    schedule: Schedule,
    tick: datetime,
    *,
    now: datetime,
    stats: WriteStats | None = None,
) -> dedup.EnqueueResult:
    """Enqueue the job of ``schedule``'s ``tick`` unless it exists: at most one job per tick."""
    return dedup.enqueue_keyed(
        store,
        keys,
        schedule.payload,
        tick_key(schedule.name, tick),
        now=now,
        stats=stats,
        tags=schedule.tags,
    )


@dataclass
class TickReport:
    """What one pass over the schedules saw and did."""

    schedules: int = 0
    """Definitions listed (readable or not)."""
    read: int = 0
    """Definitions read (GET): new or changed since this runner last read them."""
    due: int = 0
    """Schedules that had at least one due tick."""
    enqueued: int = 0
    """Ticks whose job this pass created."""
    existing: int = 0
    """Due ticks whose job existed already (another scheduler, or an earlier try, made it)."""
    skipped: int = 0
    """Definitions that are not schedules (foreign bytes, bad names), passed by."""
    failed: int = 0
    """Schedules whose tick hit a storage error this pass (retried at the next one)."""
    jobs: list[str] = field(default_factory=list)
    """The ids of the jobs this pass created."""
    at: datetime | None = None
    """The server's time the pass judged by (its listing's ``Date``)."""

    def to_json(self) -> dict[str, Any]:
        """The report as JSON values (``at`` in ISO 8601)."""
        data = dataclasses.asdict(self)
        data["at"] = None if self.at is None else self.at.isoformat()
        return data


@dataclass
class _Known:
    etag: str
    schedule: Schedule | None
    """None: the object is not a schedule (logged once, when read)."""
    next_due: datetime | None = None
    """No tick is due before this (None: not computed yet)."""


class Ticker:
    """Runs the ticks of one queue's schedules; keeps what it read between passes (see the module)."""

    def __init__(self, store: Store, keys: Keys, *, stats: WriteStats | None = None) -> None:
        self._store = store
        self._keys = keys
        self._stats = stats
        self._known: dict[str, _Known] = {}

    def tick(self) -> TickReport:
        """One pass: list the definitions, read the changed ones, enqueue every due tick."""
        report = TickReport()
        prefix = self._keys.schedules()
        seen: set[str] = set()
        now: datetime | None = None
        for page in pages(self._store, prefix):
            now = now or page.server_time
            report.at = now
            for item in page.items:
                name = item.key[len(prefix) :]
                if not name and item.size == 0:
                    continue  # the console's "folder"
                report.schedules += 1
                seen.add(name)
                self._one(name, item, now, report)
        for gone in self._known.keys() - seen:
            del self._known[gone]  # removed: forget it
        return report

    def _one(self, name: str, item: ObjectInfo, now: datetime, report: TickReport) -> None:
        known = self._known.get(name)
        if known is None or known.etag != item.etag:
            known = self._read(name, item, report)
            if known is None:
                return
        if known.schedule is None:
            report.skipped += 1
            return
        if known.schedule.paused:
            return  # no tick is due while paused: no request
        if known.next_due is not None and now < known.next_due:
            return  # nothing due: no request
        try:
            self._run(name, known, known.schedule, now, report)
        except PailError as exc:
            # One schedule's storage error never stops the pass (or the reaper):
            # its tick stays due, and the next pass tries again.
            report.failed += 1
            known.next_due = None
            log.warning("schedule %s: tick failed, retried at the next pass: %s", name, exc)

    def _read(self, name: str, item: ObjectInfo, report: TickReport) -> _Known | None:
        try:
            validate_name(name)
            if item.size > MAX_BYTES:
                raise DecodeError(f"it is {item.size} bytes, more than {MAX_BYTES}; not read")
        except PailError as exc:
            self._known[name] = _Known(item.etag, None)
            log.warning("schedules: %s is not a schedule (%s); passed by", item.key, exc)
            return self._known[name]
        obj = self._store.get(item.key)
        report.read += 1
        if obj is None:
            return None  # removed since the listing
        try:
            schedule: Schedule | None = Schedule.decode(obj.body, name)
        except DecodeError as exc:
            schedule = None
            log.warning("schedules: %s passed by: %s", item.key, exc)
        known = _Known(obj.etag, schedule)
        self._known[name] = known
        return known

    def _run(
        self, name: str, known: _Known, schedule: Schedule, now: datetime, report: TickReport
    ) -> None:
        ticks = schedule.timing.latest(now, after=schedule.since, limit=schedule.catch_up)
        if ticks:
            report.due += 1
        done = schedule
        for tick in ticks:
            result = enqueue_tick(
                self._store, self._keys, schedule, tick, now=now, stats=self._stats
            )
            if result.created:
                report.enqueued += 1
                report.jobs.append(result.id)
                log.info("schedule %s: tick %s enqueued job %s", name, tick.isoformat(), result.id)
            else:
                report.existing += 1
            done = done.done(tick, result.id)
        if done is not schedule:
            token = new_token()
            won = put_conditional(
                self._store,
                self._keys.schedule(name),
                done.encode(token),
                token,
                if_match=known.etag,
                stats=self._stats,
                reason="schedule",
            )
            if won is None:
                del self._known[name]  # replaced, or another scheduler wrote it: read it again
                return
            known.etag, known.schedule = won.etag, done
        known.next_due = schedule.timing.next_after(now)
