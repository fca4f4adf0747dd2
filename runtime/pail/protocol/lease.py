"""A held lease on ``run/{id}``: renewal by compare-and-swap, and proof of ownership.

Every change to a lease is a PUT with ``If-Match`` on the ETag of the
holder's previous write, so a worker whose lease was taken over (by the
reaper, after expiry) fails its next renewal and learns it lost the job.

Expiry is judged by the server's clock (see ``reaper``). The holder keeps a
conservative local estimate: the monotonic time at which it *sent* its last
successful write. Before any step that must only happen while it owns the
job, it checks that estimate and, if too little time is left, renews first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pail.clock import Clock
from pail.codec import LeaseRecord
from pail.errors import LeaseLostError
from pail.keys import Keys
from pail.protocol.limits.slots import Held
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store


class Lease:
    """The lease a worker holds on one job. Thread-safe: heartbeats renew it concurrently."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        record: LeaseRecord,
        etag: str,
        *,
        sent_at: float,
        visibility_timeout: float,
        clock: Clock,
        stats: WriteStats | None = None,
    ) -> None:
        self._store = store
        self._keys = keys
        self._record = record
        self._etag = etag
        self._sent_at = sent_at
        self._timeout = visibility_timeout
        self._clock = clock
        self._stats = stats
        self._lock = threading.RLock()
        self._lost = False
        self._pending_progress: Any = None
        self._has_progress = False
        self._slots: tuple[Held, ...] = ()
        self.slot_returned: Callable[[Held], None] | None = None
        """Told of each slot given back (the claimer's gate: its index is tried first next time)."""

    @property
    def job_id(self) -> str:
        return self._record.job_id

    @property
    def keys(self) -> Keys:
        """The keys of the shard this job lives in: every write about it goes there."""
        return self._keys

    @property
    def key(self) -> str:
        return self._keys.run(self._record.job_id)

    @property
    def record(self) -> LeaseRecord:
        with self._lock:
            return self._record

    @property
    def etag(self) -> str:
        with self._lock:
            return self._etag

    @property
    def lost(self) -> bool:
        with self._lock:
            return self._lost

    def remaining(self) -> float:
        """Seconds this holder can still be sure the lease is its own."""
        with self._lock:
            return self._timeout - (self._clock.monotonic() - self._sent_at)

    def set_progress(self, progress: Any) -> None:
        """Record progress; it is written with the next renewal, at no extra request."""
        with self._lock:
            self._pending_progress = progress
            self._has_progress = True

    def renew(self, **changes: Any) -> None:
        """Rewrite the lease under ``If-Match``; raise ``LeaseLostError`` if it is not ours."""
        with self._lock:
            if self._lost:
                raise LeaseLostError(f"job {self.job_id}: lease already lost")
            if self._has_progress and "progress" not in changes:
                changes["progress"] = self._pending_progress
            record = self._record.rewritten(**changes)
            sent_at = self._clock.monotonic()
            result = put_conditional(
                self._store,
                self.key,
                record.encode(),
                record.write,
                if_match=self._etag,
                stats=self._stats,
                reason="renew",
            )
            if result is None:
                self._lost = True
                raise LeaseLostError(f"job {self.job_id}: the lease was taken over")
            self._record, self._etag, self._sent_at = record, result.etag, sent_at
            self._has_progress = False

    def ensure(self, margin: float) -> None:
        """Renew unless at least ``margin`` seconds of the lease surely remain."""
        if self.remaining() < margin:
            self.renew()

    @property
    def slots(self) -> tuple[Held, ...]:
        """The concurrency slots this job holds (``pail.protocol.limits``); none without limits."""
        with self._lock:
            return self._slots

    def hold_slots(self, held: tuple[Held, ...]) -> None:
        """Record the slots the claim took for this job: its settle gives them back."""
        with self._lock:
            self._slots = held

    def take_slots(self) -> tuple[Held, ...]:
        """The held slots, now no longer this lease's to give back (each is given back once)."""
        with self._lock:
            held, self._slots = self._slots, ()
            return held

    def mark_lost(self) -> None:
        with self._lock:
            self._lost = True
