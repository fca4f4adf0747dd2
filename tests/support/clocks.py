"""The server's clock in tests: what ``MemoryStore`` stamps as ``LastModified`` and ``Date``.

Lease expiry is judged by the server's clock (see ``pail.clock``), so a test
that moves this one decides exactly when a lease has expired, with no wait.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

START = datetime(2026, 1, 1, tzinfo=UTC)


class ServerClock:
    """A server clock that moves only when the test says: ``MemoryStore("jobs", now=clock)``.

    >>> clock = ServerClock()
    >>> clock.advance(90)
    >>> clock().isoformat()
    '2026-01-01T00:01:30+00:00'
    """

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
