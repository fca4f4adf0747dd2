"""A store wrapper that counts the requests it forwards, by S3 operation.

One store call is one S3 request (botocore's resends aside), so wrapping the
store a piece of code reads through tells what that code cost. The search
page states its requests this way, and the dashboard's footer counts the
last minute's (``pail.dashboard.meter``); tests record the calls of a
``MemoryStore`` with it::

    >>> from pail.store.memory import MemoryStore
    >>> store = CountingStore(MemoryStore("jobs"))
    >>> _ = store.put("queue/a", b"{}")
    >>> store.get("queue/a") is not None, store.get("queue/b")
    (True, None)
    >>> dict(store.requests)
    {'PutObject': 1, 'GetObject': 2}

The operations are named as S3's API names them (``ListObjectsV2``,
``GetObject``, ``HeadObject``, ``PutObject``, ``DeleteObject``), the names a
botocore event hook sees, so a count taken here compares with one taken on
the wire.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping

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

LIST = "ListObjectsV2"
GET = "GetObject"
HEAD = "HeadObject"
PUT = "PutObject"
DELETE = "DeleteObject"

OnRequest = Callable[[str, str], None]
"""Called with ``(operation, key)`` before each request is forwarded (a listing: its prefix)."""


class CountingStore:
    """A ``Store`` (and ``PrefixLister``, ``BoundedGetter``) counting every request it forwards.

    ``requests`` holds the count by operation. ``on_request``, when given, is
    called with ``(operation, key)`` before each request, from the caller's
    thread (several threads may call at once). ``list_prefixes`` needs an
    inner store that lists prefixes; ``get_bounded`` works over any store, at
    one GET on a ``BoundedGetter`` and a HEAD first on others.
    """

    def __init__(self, inner: Store, *, on_request: OnRequest | None = None) -> None:
        self._inner = inner
        self._on_request = on_request
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()

    def _count(self, operation: str, key: str) -> None:
        with self._lock:
            self.requests[operation] += 1
        if self._on_request is not None:
            self._on_request(operation, key)

    def total(self) -> int:
        """Requests forwarded so far, of every operation."""
        with self._lock:
            return sum(self.requests.values())

    @property
    def inner(self) -> Store:
        """The store this one forwards to."""
        return self._inner

    @property
    def bucket(self) -> str:
        return self._inner.bucket

    @property
    def ordered_listing(self) -> bool:
        return self._inner.ordered_listing

    def get(self, key: str) -> StoredObject | None:
        self._count(GET, key)
        return self._inner.get(key)

    def get_bounded(self, key: str, max_bytes: int) -> StoredObject | None:
        """``get``, or ``ObjectTooLargeError`` for a body over ``max_bytes`` (``BoundedGetter``)."""
        if isinstance(self._inner, BoundedGetter):
            self._count(GET, key)
            return self._inner.get_bounded(key, max_bytes)
        info = self.head(key)
        if info is None:
            return None
        if info.size > max_bytes:
            raise ObjectTooLargeError(
                key,
                size=info.size,
                etag=info.etag,
                last_modified=info.last_modified,
                limit=max_bytes,
            )
        self._count(GET, key)
        return self._inner.get(key)

    def head(self, key: str) -> ObjectInfo | None:
        self._count(HEAD, key)
        return self._inner.head(key)

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> WriteResult:
        self._count(PUT, key)
        return self._inner.put(
            key,
            body,
            if_none_match=if_none_match,
            if_match=if_match,
            metadata=metadata,
            content_type=content_type,
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self._count(DELETE, key)
        self._inner.delete(key, if_match=if_match)

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        self._count(LIST, prefix)
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
        self._count(LIST, prefix)
        return self._inner.list_prefixes(
            prefix, delimiter=delimiter, max_keys=max_keys, continuation=continuation
        )

    def presign_get(self, key: str, expires_in: int) -> str:
        return self._inner.presign_get(key, expires_in)  # signed locally: no request
