"""The reaper's pass over waiting jobs: the edges no dependency carries.

A job enqueued ``after`` jobs that already existed (``Pail.enqueue(after=...)``)
is named by none of their records, so nothing tells it when they end: its
record lists them as ``late``. Each reaper pass lists ``wait/`` (one LIST
of at most ``page_size`` keys) and, for each late dependency not yet met,
looks at its outcome (a HEAD of ``done/{id}``; none while the reaper's own
listing of ``run/`` shows it running), then tells the waiting job exactly as
a finisher would (``release.tell``). A record is read again only when its
ETag changed since this reaper last read it; one with no late edge left
costs nothing after its first read, except one whose dependencies are all
met (a promotion that stopped half-way), which is promoted again. Foreign bytes under ``wait/`` are
logged once per ETag and left alone, never raised into the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from pail.codec import META_OUTCOME, OUTCOME_SUCCEEDED
from pail.errors import DecodeError
from pail.keys import WAIT, Keys
from pail.protocol.dependencies.record import WaitingJob
from pail.protocol.dependencies.release import promote, tell, unpinned
from pail.protocol.writes import WriteStats
from pail.store.base import Store

log = logging.getLogger("pail")

PAGE_SIZE = 1000


@dataclass
class RepairReport:
    """What one pass over ``wait/`` saw and did."""

    waiting: int = 0
    looked: int = 0
    """Late dependencies whose outcome was looked at (a HEAD each)."""
    told: int = 0
    foreign: int = 0
    told_ids: list[str] = field(default_factory=list)


class Repairer:
    """Looks at the late dependencies of a queue's waiting jobs, once per reaper pass."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        *,
        stats: WriteStats | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._store = store
        self._keys = unpinned(keys)
        self._stats = stats
        self._page_size = page_size
        self._read: dict[str, tuple[str, WaitingJob | None]] = {}
        """key -> (ETag, record as read; None for foreign bytes)."""

    def repair(self, running: Collection[str] | None = None) -> RepairReport:
        """One pass; ``running``: job ids the reaper's complete listing of ``run/`` showed."""
        report = RepairReport()
        page = self._store.list(self._keys.prefix(WAIT), max_keys=self._page_size)
        listed: dict[str, tuple[str, WaitingJob | None]] = {}
        for item in page.items:
            job_id = self._keys.entry_id(item.key, WAIT)
            if job_id is None:
                continue  # a console folder or a nested key: names no job
            report.waiting += 1
            known = self._read.get(item.key)
            if known is None or known[0] != item.etag:
                known = self._load(item.key, job_id, report)
                if known is None:
                    continue
            listed[item.key] = known
            record = known[1]
            if record is None:
                continue
            if record.ready:
                # Every dependency met, yet it waits: a promotion that stopped
                # between its entry and the record's removal. Finish it.
                promote(self._store, self._keys.of_key(item.key, WAIT), record, known[0])
                report.told += 1
                report.told_ids.append(job_id)
                continue
            for dependency in record.late:
                if dependency in record.met or (running is not None and dependency in running):
                    continue
                report.looked += 1
                outcome = self._outcome(dependency)
                if outcome is None:
                    continue
                tell(self._store, self._keys, dependency, (job_id,), outcome, stats=self._stats)
                report.told += 1
                report.told_ids.append(job_id)
        self._read = listed
        return report

    def _load(
        self, key: str, job_id: str, report: RepairReport
    ) -> tuple[str, WaitingJob | None] | None:
        current = self._store.get(key)
        if current is None:
            return None
        try:
            return current.etag, WaitingJob.decode(current.body, job_id)
        except DecodeError as exc:
            report.foreign += 1
            log.warning("reaper: %s is not a waiting job pail can act on; left alone: %s", key, exc)
            return current.etag, None

    def _outcome(self, job_id: str) -> str | None:
        for layout in self._keys.layouts(job_id):
            found = self._store.head(layout.done(job_id))
            if found is not None:
                return found.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
        return None
