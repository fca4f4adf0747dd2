"""A ``MemoryStore`` that records every request it serves: a cheap way to count a call's requests.

``calls`` holds ``(operation, key)`` in the order they were served
(``list``: the prefix). Requests sent together (a claim's DELETE and HEAD)
may be recorded in either order; compare them as a ``Counter`` when it matters.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime

from pail.store.base import ListPage, ObjectInfo, PrefixPage, StoredObject, WriteResult
from pail.store.memory import MemoryStore


class RecordingStore(MemoryStore):
    """A ``MemoryStore`` that records ``(operation, key)`` for every request."""

    def __init__(self, bucket: str = "jobs", *, now: Callable[[], datetime] | None = None) -> None:
        if now is None:
            super().__init__(bucket)
        else:
            super().__init__(bucket, now=now)
        self._record_lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []

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

    def get(self, key: str) -> StoredObject | None:
        self._record("get", key)
        return super().get(key)

    def head(self, key: str) -> ObjectInfo | None:
        self._record("head", key)
        return super().head(key)

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
        self._record("put", key)
        return super().put(
            key,
            body,
            if_none_match=if_none_match,
            if_match=if_match,
            metadata=metadata,
            content_type=content_type,
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self._record("delete", key)
        super().delete(key, if_match=if_match)

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        self._record("list", prefix)
        return super().list(
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
        self._record("list", prefix)
        return super().list_prefixes(
            prefix, delimiter=delimiter, max_keys=max_keys, continuation=continuation
        )
