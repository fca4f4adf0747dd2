"""Time, injected.

Two clocks matter and they are never mixed:

* the **server clock** (S3's ``Date`` and ``LastModified``) judges whether a
  lease expired: the reaper compares an object's ``LastModified`` with the
  ``Date`` of the listing that returned it, both stamped by the server;
* the **local monotonic clock** tells a worker how long ago it renewed its
  lease, so it can renew in time and refuse to act on a lease it can no
  longer prove it holds.

A worker never compares a server timestamp with its own wall clock.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Local time as the runtime sees it. Tests substitute a manual clock."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        """Wait ``seconds`` or until ``wake`` is set, whichever comes first."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if seconds <= 0:
            return
        if wake is None:
            time.sleep(seconds)
        else:
            wake.wait(seconds)


class ManualClock:
    """A clock that moves only when told to; ``sleep`` advances it.

    >>> c = ManualClock()
    >>> c.sleep(2.5); c.monotonic()
    2.5
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if wake is not None and wake.is_set():
            return
        self.advance(max(0.0, seconds))
