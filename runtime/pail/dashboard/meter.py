"""Counting the dashboard's own requests to the bucket, so that the page can report them.

``MeteredStore`` wraps the store the dashboard reads through and records
every call (one call is one S3 request, resends by botocore aside), so the
footer of every page says how many requests the last minute cost.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

from pail.errors import ObjectTooLargeError
from pail.store.base import (
    BoundedGetter,
    ListPage,
    ObjectInfo,
    PrefixLister,
    PrefixPage,
    Store,
    StoredObject,
    WriteResult,
)

WINDOW = 60.0

# What each store call is on the wire.
OPERATIONS = {
    "list": "LIST",
    "list_prefixes": "LIST",
    "get": "GET",
    "head": "HEAD",
    "put": "PUT",
    "delete": "DELETE",
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


class MeteredStore:
    """A ``Store`` (and ``PrefixLister``) that counts every request it forwards.

    With ``max_read``, ``get`` reads no body over that many bytes: it raises
    ``ObjectTooLargeError`` instead, at the cost of the same one GET on a
    ``BoundedGetter`` (the S3 and memory stores), or a HEAD first on others.
    """

    def __init__(self, inner: Store, meter: RequestMeter, *, max_read: int | None = None) -> None:
        self._inner = inner
        self.meter = meter
        self.max_read = max_read

    def unbounded(self) -> MeteredStore:
        """The same store and meter, reading whole bodies (for actions, which must)."""
        return MeteredStore(self._inner, self.meter)

    @property
    def inner(self) -> Store:
        return self._inner

    @property
    def bucket(self) -> str:
        return self._inner.bucket

    @property
    def ordered_listing(self) -> bool:
        return self._inner.ordered_listing

    def get(self, key: str) -> StoredObject | None:
        limit = self.max_read
        if limit is None:
            self.meter.record("GET")
            return self._inner.get(key)
        if isinstance(self._inner, BoundedGetter):
            self.meter.record("GET")
            return self._inner.get_bounded(key, limit)
        info = self.head(key)
        if info is None:
            return None
        if info.size > limit:
            raise ObjectTooLargeError(
                key, size=info.size, etag=info.etag, last_modified=info.last_modified, limit=limit
            )
        self.meter.record("GET")
        return self._inner.get(key)

    def head(self, key: str) -> ObjectInfo | None:
        self.meter.record("HEAD")
        return self._inner.head(key)

    def put(self, key: str, body: bytes, **options: Any) -> WriteResult:
        self.meter.record("PUT")
        return self._inner.put(key, body, **options)

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self.meter.record("DELETE")
        self._inner.delete(key, if_match=if_match)

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        self.meter.record("LIST")
        return self._inner.list(
            prefix, max_keys=max_keys, start_after=start_after, continuation=continuation
        )

    def list_prefixes(
        self,
        prefix: str,
        *,
        delimiter: str = "/",
        max_keys: int = 1000,
        continuation: str | None = None,
    ) -> PrefixPage:
        if not isinstance(self._inner, PrefixLister):
            raise NotImplementedError(f"{type(self._inner).__name__} cannot list prefixes")
        self.meter.record("LIST")
        return self._inner.list_prefixes(
            prefix, delimiter=delimiter, max_keys=max_keys, continuation=continuation
        )

    def presign_get(self, key: str, expires_in: int) -> str:
        return self._inner.presign_get(key, expires_in)  # signed locally: no request
