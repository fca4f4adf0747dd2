"""What the dashboard shows, read through the operator API at a bounded, cached cost.

Every read goes through ``pail.operate`` over a ``MeteredStore``. A queue's
snapshot (4 LISTs) is kept for ``interval`` seconds and the list of queues
for ``QUEUES_TTL`` seconds, whatever the number of open tabs or refreshes:
that bounds the requests per minute the dashboard can cost (measured and
shown on every page). Job bodies, outcomes and dead letters are cached by
ETag (``Reader``): on an idle queue a refresh costs LISTs only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pail.dashboard.limits_form import Kind, LimitChange
from pail.dashboard.meter import MeteredStore, RequestMeter
from pail.errors import ConfigurationError, DecodeError, ObjectTooLargeError, PailError
from pail.keys import RUN
from pail.operate.dead_letters import Letter, read_letter
from pail.operate.failures import Failure, recent_failures
from pail.operate.jobs import JobPage, JobRow, list_jobs, row_for, rows_from_scan
from pail.operate.limits import limit_lines, read_rates
from pail.operate.objects import JobDetail, JobKind, Reader
from pail.operate.queues import QueueList, list_queues
from pail.operate.search import SearchPage
from pail.operate.snapshot import PAGE_SIZE, Snapshot, take_snapshot
from pail.protocol import limits as limiting
from pail.protocol import pause as pause_marker
from pail.protocol.pause import PauseState
from pail.protocol.schedules.definition import Schedule, validate_name
from pail.protocol.schedules.registry import Listed, ListedPage, read_page
from pail.queue import Pail
from pail.status import JobStatus, locate
from pail.store.base import Store

DEFAULT_INTERVAL = 10.0
QUEUES_TTL = 60.0
MAX_READ = 4 * 1024 * 1024
"""Bytes of one object the views read at most: anyone who can write to the bucket can
write a 30 MB dead letter, and a page must stay a page. pail's own records are far
smaller (a quarantined foreign object keeps 1 MB of it, a traceback 4,000 characters).
An object over it is shown by its size, unread; actions still read it whole."""
RUNNING_SHOWN = 20
FAILURES_SHOWN = 10
SCHEDULES_SHOWN = 50
"""Schedules one page lists: one LIST, a GET per definition, and the last job's state of each."""
ENDED = frozenset({"done", "failed", "cancelled"})
"""Job states that never change (a redrive aside): read once, not at every refresh."""
KEPT_STATES = 10_000


@dataclass(frozen=True, slots=True)
class QueueView:
    """Everything the queue page shows, from one snapshot."""

    namespace: str
    snapshot: Snapshot
    running: tuple[JobRow, ...]
    running_more: bool
    failures: tuple[Failure, ...]
    pause: PauseState | None = None
    """The queue's pause marker (``pail pause``), or None while it claims."""
    limits: tuple[str, ...] = ()
    """The queue's limits (``pail limit``), one line each (``operate.limits.limit_lines``)."""


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One row of the schedules page: the definition (or why it is not one) and its last job's state."""

    entry: Listed
    last_state: str | None
    """The last job's state (``pail status``'s names), a note when it cannot be read, or None
    when the schedule has not enqueued a job yet."""


@dataclass(frozen=True, slots=True)
class SchedulesView:
    """Everything the schedules page shows: one bounded page of definitions."""

    namespace: str
    rows: tuple[ScheduleRow, ...]
    page: ListedPage


class Dashboard:
    """The dashboard's read model and actions for one bucket.

    >>> from pail import MemoryStore
    >>> board = Dashboard(MemoryStore("jobs"))
    >>> board.queues().queues
    ()
    """

    def __init__(
        self,
        store: Store,
        *,
        interval: float = DEFAULT_INTERVAL,
        max_pages: int = 1,
        page_size: int = PAGE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        shards: int | None = None,
    ) -> None:
        self.shards = shards
        """The shard count the bucket's queues are read with (``--shards``), or None: each
        queue's own, from its layout marker (``pail.protocol.layout``), read once a
        ``QUEUES_TTL``."""
        self.meter = RequestMeter(clock=clock)
        self.store = MeteredStore(store, self.meter, max_read=MAX_READ)
        self._actions_store = self.store.unbounded()
        self.reader = Reader(self.store, keep_payloads=False)  # lists never show one
        self.interval = interval
        self.max_pages = max_pages
        self.page_size = page_size
        self._clock = clock
        self._lock = threading.Lock()
        self._queues: tuple[float, QueueList] | None = None
        self._snapshots: dict[str, tuple[float, Snapshot]] = {}
        self._pauses: dict[str, tuple[float, PauseState | None]] = {}
        self._limits: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._pails: dict[str, tuple[float, Pail]] = {}
        self._action_pails: dict[str, tuple[float, Pail]] = {}
        self._schedules: dict[tuple[str, str | None], tuple[float, SchedulesView]] = {}
        self._job_states: dict[tuple[str, str], tuple[float, str]] = {}

    @property
    def bucket(self) -> str:
        return self.store.bucket

    def pail(self, namespace: str) -> Pail:
        """A ``Pail`` on one queue of the bucket, reading through the meter.

        Kept ``QUEUES_TTL`` seconds, so its layout marker is read once that
        long (a queue that grew its shard count is seen within it).
        """
        return self._kept_pail(self._pails, self.store, namespace)

    def _action_pail(self, namespace: str) -> Pail:
        """``pail(namespace)`` for actions: its reads are not bounded (a redrive copies it all)."""
        return self._kept_pail(self._action_pails, self._actions_store, namespace)

    def _kept_pail(
        self, kept_pails: dict[str, tuple[float, Pail]], store: MeteredStore, namespace: str
    ) -> Pail:
        with self._lock:
            kept = kept_pails.get(namespace)
            if kept is not None and self._fresh(kept[0], QUEUES_TTL):
                return kept[1]
            pail = Pail(store, queue=namespace, shards=self.shards)
            kept_pails[namespace] = (self._clock(), pail)
            return pail

    def _fresh(self, taken: float, ttl: float) -> bool:
        return self._clock() - taken < ttl

    def queues(self) -> QueueList:
        """The bucket's queues, listed again at most every ``QUEUES_TTL`` seconds."""
        with self._lock:
            if self._queues is not None and self._fresh(self._queues[0], QUEUES_TTL):
                return self._queues[1]
        found = list_queues(self.store)
        with self._lock:
            self._queues = (self._clock(), found)
        return found

    def snapshot(self, namespace: str) -> Snapshot:
        """The queue's snapshot, taken again at most every ``interval`` seconds."""
        with self._lock:
            cached = self._snapshots.get(namespace)
            if cached is not None and self._fresh(cached[0], self.interval):
                return cached[1]
        pail = self.pail(namespace)
        snap = take_snapshot(
            self.store, pail.keys, self.reader, max_pages=self.max_pages, page_size=self.page_size
        )
        with self._lock:
            self._snapshots[namespace] = (self._clock(), snap)
        return snap

    def pause_state(self, namespace: str) -> PauseState | None:
        """The queue's pause marker (1 GET), read again at most every ``interval`` seconds."""
        with self._lock:
            cached = self._pauses.get(namespace)
            if cached is not None and self._fresh(cached[0], self.interval):
                return cached[1]
        state = pause_marker.read(self.store, self.pail(namespace).keys)
        with self._lock:
            self._pauses[namespace] = (self._clock(), state)
        return state

    def forget(self, namespace: str | None = None) -> None:
        """Drop cached snapshots (after an action), so the next page shows its effect."""
        with self._lock:
            if namespace is None:
                self._snapshots.clear()
                self._pauses.clear()
                self._schedules.clear()
                self._limits.clear()
                self._queues = None
            else:
                self._snapshots.pop(namespace, None)
                self._pauses.pop(namespace, None)
                for cached in [k for k in self._schedules if k[0] == namespace]:
                    del self._schedules[cached]
                self._limits.pop(namespace, None)

    def queue_view(self, namespace: str) -> QueueView:
        snap = self.snapshot(namespace)
        keys = snap.keys
        running, more = rows_from_scan(
            keys, snap.run, JobKind.RUNNING, self.reader, limit=RUNNING_SHOWN
        )
        failures = recent_failures(snap, self.reader, limit=FAILURES_SHOWN)
        pause = self.pause_state(namespace)
        return QueueView(
            namespace,
            snap,
            tuple(running),
            more,
            tuple(failures),
            pause,
            self.limit_lines(namespace),
        )

    def limit_lines(self, namespace: str) -> tuple[str, ...]:
        """The queue's limits, one line each (1 GET of ``_pail/limits``), read again at most every ``interval`` seconds."""
        with self._lock:
            cached = self._limits.get(namespace)
            if cached is not None and self._fresh(cached[0], self.interval):
                return cached[1]
        limits = limiting.read(self.store, self.pail(namespace).keys)
        lines = tuple(limit_lines(limits, read_rates(limits)))
        with self._lock:
            self._limits[namespace] = (self._clock(), lines)
        return lines

    def jobs(self, namespace: str, kind: JobKind, *, after: str | None, limit: int = 50) -> JobPage:
        pail = self.pail(namespace)
        return list_jobs(
            self.store, pail.keys, kind, self.reader, limit=limit, after=after, max_pages=1
        )

    def search(self, namespace: str, **arguments: Any) -> SearchPage:
        """A page of ``Pail.search`` on the queue (the search page's form, checked)."""
        return self.pail(namespace).search(**arguments)

    def schedules(self, namespace: str, *, after: str | None = None) -> SchedulesView:
        """One page of the queue's schedules with their last job's state, kept ``interval`` seconds.

        A definition that is not a schedule (foreign bytes, a bad name, too
        large) is a row that says so. A last job in a state that never changes
        is read once; one pending or running again at the next refresh.
        """
        with self._lock:
            cached = self._schedules.get((namespace, after))
            if cached is not None and self._fresh(cached[0], self.interval):
                return cached[1]
        pail = self.pail(namespace)
        page = read_page(self.store, pail.keys, after=after, limit=SCHEDULES_SHOWN)
        rows = []
        for entry in page.entries:
            last = entry.info.last_job if entry.info is not None else None
            rows.append(
                ScheduleRow(entry, None if last is None else self._job_state(namespace, last))
            )
        view = SchedulesView(namespace, tuple(rows), page)
        with self._lock:
            self._schedules[(namespace, after)] = (self._clock(), view)
        return view

    def _job_state(self, namespace: str, job_id: str) -> str:
        with self._lock:
            kept = self._job_states.get((namespace, job_id))
            if kept is not None and (kept[1] in ENDED or self._fresh(kept[0], self.interval)):
                return kept[1]
        try:
            status = self.pail(namespace).status(job_id)
            state = "gone (expired, or never written)" if status is None else status.state.value
        except ObjectTooLargeError as exc:
            state = f"unreadable ({exc.size:,} bytes)"
        except PailError as exc:
            state = f"unknown ({exc})"
        with self._lock:
            if len(self._job_states) >= KEPT_STATES:
                self._job_states.clear()
            self._job_states[(namespace, job_id)] = (self._clock(), state)
        return state

    def letter(self, namespace: str, job_id: str) -> Letter | None:
        """The dead letter (1 GET); one over ``MAX_READ`` comes unread, its size said."""
        try:
            return read_letter(self.store, self.pail(namespace).keys, job_id)
        except ObjectTooLargeError as exc:
            unread = JobDetail(
                unreadable=f"This record is {exc.size:,} bytes, more than the dashboard reads "
                f"({exc.limit:,}): it was not read. Redrive and Delete still work; "
                "read it with `aws s3 cp` if you must."
            )
            return Letter(job_id, exc.key, exc.etag, exc.last_modified, exc.size, unread, b"")

    def status(self, namespace: str, job_id: str) -> JobStatus | None:
        return self.pail(namespace).status(job_id)

    def lease(self, namespace: str, job_id: str) -> JobRow | None:
        """The running job's lease row (holder, last renewal), if it has one.

        A one-key LIST rather than a HEAD: its ``Date`` dates the last renewal
        by the server's clock, as everything else here is.
        """
        keys = self.pail(namespace).keys
        key = locate(self.store, keys, job_id).run(job_id)
        page = self.store.list(key, max_keys=1)
        info = next((item for item in page.items if item.key == key), None)
        if info is None:
            return None
        detail = self.reader.detail(keys, info, RUN)
        return row_for(keys, info, JobKind.RUNNING, page.server_time, detail)

    # -- actions ----------------------------------------------------------------

    def pause(self, namespace: str, reason: str | None) -> bool:
        """Pause the queue (``Pail.pause``); False if it was paused already."""
        changed = self._action_pail(namespace).pause(reason or "paused from the dashboard")
        self.forget(namespace)
        return changed

    def resume(self, namespace: str) -> bool:
        """Resume the queue (``Pail.resume``); False if it was not paused."""
        changed = self._action_pail(namespace).resume()
        self.forget(namespace)
        return changed

    def pause_schedule(self, namespace: str, name: str, paused: bool) -> str:
        """Pause (or resume) schedule ``name``: ``changed``, ``unchanged``, ``gone`` or ``unreadable``."""
        pail = self._action_pail(namespace)
        try:
            current = self._actions_store.get(pail.keys.schedule(validate_name(name)))
            if current is None:
                return "gone"
            if Schedule.decode(current.body, name).paused == paused:
                return "unchanged"
            done = pail.pause_schedule(name, paused=paused)
        except (ConfigurationError, DecodeError):
            return "unreadable"
        finally:
            self.forget(namespace)
        return "gone" if done is None else "changed"

    def change_limit(self, namespace: str, change: LimitChange) -> bool:
        """Make one checked limit change (``Pail.set_limit``, ``set_rate``, ``clear_limits``).

        False when ``clear`` found no limits. Each is the API's conditional
        read-modify-write of ``_pail/limits`` (1 GET, 1 PUT; ``clear``: 1 HEAD,
        1 DELETE), so a change made meanwhile by another operator is kept.
        """
        pail = self._action_pail(namespace)
        try:
            if change.kind is Kind.CLEAR:
                return pail.clear_limits()
            if change.kind is Kind.CONCURRENCY:
                pail.set_limit(change.concurrency, group=change.group)
            else:
                pail.set_rate(change.rate, group=change.group)
            return True
        finally:
            self.forget(namespace)

    def redrive(self, namespace: str, job_id: str) -> bool:
        done = self._action_pail(namespace).redrive(job_id)
        self.forget(namespace)
        return bool(done)

    def redrive_all(self, namespace: str) -> list[str]:
        done = self._action_pail(namespace).redrive(all=True)
        self.forget(namespace)
        return done

    def delete_letter(self, namespace: str, job_id: str, etag: str) -> bool:
        deleted = self._action_pail(namespace).delete_dead_letter(job_id, etag=etag)
        self.forget(namespace)
        return deleted

    def requests_last_minute(self) -> dict[str, Any]:
        counts = dict(self.meter.last_minute())
        return {"total": sum(counts.values()), "by_operation": counts}
