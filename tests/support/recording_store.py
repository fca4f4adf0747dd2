"""A ``MemoryStore`` that records every request it serves: a cheap way to count a call's requests.

``calls`` holds ``(operation, key)`` in the order they were served
(``list``: the prefix). Requests sent together (a claim's DELETE and HEAD)
may be recorded in either order; compare them as a ``Counter`` when it matters.
The counting is ``pail.store.counting``'s, the wrapper the search page and the
dashboard count their requests with.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime

from pail.store import counting
from pail.store.counting import CountingStore
from pail.store.memory import MemoryStore

# The store method each S3 operation is ("list" both for listings of keys and of prefixes).
_METHODS = {
    counting.LIST: "list",
    counting.GET: "get",
    counting.HEAD: "head",
    counting.PUT: "put",
    counting.DELETE: "delete",
}


class RecordingStore(CountingStore):
    """A ``MemoryStore`` behind a ``CountingStore`` that records ``(operation, key)`` for every request."""

    def __init__(self, bucket: str = "jobs", *, now: Callable[[], datetime] | None = None) -> None:
        self.memory = MemoryStore(bucket) if now is None else MemoryStore(bucket, now=now)
        super().__init__(self.memory, on_request=self._recorded)
        self._record_lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []

    def _recorded(self, operation: str, key: str) -> None:
        self._record(_METHODS[operation], key)

    def _record(self, operation: str, key: str) -> None:
        with self._record_lock:
            self.calls.append((operation, key))

    def clear(self) -> None:
        """Forget the requests recorded so far."""
        with self._record_lock:
            self.calls.clear()

    def operations(self) -> Counter[str]:
        """How many requests of each operation were served."""
        with self._record_lock:
            return Counter(operation for operation, _ in self.calls)

    def keys(self) -> list[str]:
        """Every key in the store (``MemoryStore.keys``): no request."""
        return self.memory.keys()
