"""Time, injected: every local reading of time in the runtime comes from one ``Clock``.

Three readings matter and they are never mixed:

* the **server clock** (S3's ``Date`` and ``LastModified``) judges whether a
  lease expired: the reaper compares an object's ``LastModified`` with the
  ``Date`` of the listing that returned it, both stamped by the server;
* the **local monotonic clock** tells a worker how long ago it renewed its
  lease, so it can renew in time and refuse to act on a lease it can no
  longer prove it holds, and times handlers and idle waits;
* the **local wall clock** (``Clock.now``) stamps what a producer writes:
  a job's ``enqueued_at``, and the due time a relative ``delay`` counts from
  (a producer sees no server time before its write).

A worker never compares a server timestamp with its own wall clock. A
``Pail`` takes its clock as ``Pail(store, clock=...)``; tests and the
simulation pass a ``ManualClock`` or their own.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Local time as the runtime sees it. Tests substitute a manual clock."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def now(self) -> datetime:
        """The wall clock: an aware UTC ``datetime``."""
        ...

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        """Wait ``seconds`` or until ``wake`` is set, whichever comes first."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if seconds <= 0:
            return
        if wake is None:
            time.sleep(seconds)
        else:
            wake.wait(seconds)


class ManualClock:
    """A clock that moves only when told to; ``sleep`` advances it.

    Its wall clock starts at ``wall`` (default: the real time when it is made)
    and moves with it.

    >>> c = ManualClock(wall=datetime(2026, 1, 1, tzinfo=UTC))
    >>> c.sleep(2.5); c.monotonic(), c.now().isoformat()
    (2.5, '2026-01-01T00:00:02.500000+00:00')
    """

    def __init__(self, start: float = 0.0, *, wall: datetime | None = None) -> None:
        self._start = start
        self._now = start
        self._wall = wall or datetime.now(UTC)
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def now(self) -> datetime:
        with self._lock:
            return self._wall + timedelta(seconds=self._now - self._start)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if wake is not None and wake.is_set():
            return
        self.advance(max(0.0, seconds))
