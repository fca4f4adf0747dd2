"""Counting the dashboard's own requests to the bucket, so that the page can report them.

``MeteredStore`` wraps the store the dashboard reads through and records
every call (one call is one S3 request, resends by botocore aside; the
counting is ``pail.store.counting``'s), so the footer of every page says how
many requests the last minute cost.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping

from pail.store import counting
from pail.store.base import Store, StoredObject
from pail.store.counting import CountingStore

WINDOW = 60.0

# How the footer names each S3 operation.
OPERATIONS = {
    counting.LIST: "LIST",
    counting.GET: "GET",
    counting.HEAD: "HEAD",
    counting.PUT: "PUT",
    counting.DELETE: "DELETE",
}


class RequestMeter:
    """Timestamps of requests in a sliding window."""

    def __init__(
        self, *, window: float = WINDOW, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window = window
        self._clock = clock
        self._events: deque[tuple[float, str]] = deque()
        self._lock = threading.Lock()
        self.total = 0

    def record(self, operation: str) -> None:
        with self._lock:
            self._events.append((self._clock(), operation))
            self.total += 1
            self._trim()

    def _trim(self) -> None:
        cutoff = self._clock() - self._window
        while self._events and self._events[0][0] < cutoff:
            self._events.popleft()

    def last_minute(self) -> Mapping[str, int]:
        """Requests by operation (LIST, GET, HEAD, PUT, DELETE) in the last ``window`` seconds."""
        with self._lock:
            self._trim()
            return Counter(op for _, op in self._events)


class MeteredStore(CountingStore):
    """A ``CountingStore`` whose requests also go to ``meter``, read through ``max_read``.

    With ``max_read``, ``get`` reads no body over that many bytes: it raises
    ``ObjectTooLargeError`` instead, at the cost of the same one GET on a
    ``BoundedGetter`` (the S3 and memory stores), or a HEAD first on others.
    """

    def __init__(self, inner: Store, meter: RequestMeter, *, max_read: int | None = None) -> None:
        super().__init__(
            inner, on_request=lambda operation, _key: meter.record(OPERATIONS[operation])
        )
        self.meter = meter
        self.max_read = max_read

    def unbounded(self) -> MeteredStore:
        """The same store and meter, reading whole bodies (for actions, which must)."""
        return MeteredStore(self.inner, self.meter)

    def get(self, key: str) -> StoredObject | None:
        if self.max_read is None:
            return super().get(key)
        return self.get_bounded(key, self.max_read)
