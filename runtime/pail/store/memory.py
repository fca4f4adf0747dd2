"""An in-memory ``Store`` for unit tests and for users' own tests.

It honours the same contract as S3 (``tests/contract`` proves it): atomic
conditional writes, strongly consistent listings, a server clock. Time comes
from an injectable ``now`` function so tests can move it.
"""

from __future__ import annotations

import builtins
import hashlib
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pail.errors import ConditionFailedError, ObjectTooLargeError
from pail.store.base import ListPage, ObjectInfo, PrefixPage, StoredObject, WriteResult


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Entry:
    body: bytes
    etag: str
    last_modified: datetime
    metadata: Mapping[str, str]


class MemoryStore:
    """A thread-safe, in-process object store with S3's conditional-write semantics.

    >>> store = MemoryStore("jobs")
    >>> _ = store.put("queue/a", b"{}", if_none_match=True)
    >>> [item.key for item in store.list("queue/").items]
    ['queue/a']
    """

    def __init__(
        self,
        bucket: str = "memory",
        *,
        now: Callable[[], datetime] = _utcnow,
        ordered_listing: bool = True,
        seed: int | None = None,
    ) -> None:
        self._bucket = bucket
        self._now = now
        self._ordered = ordered_listing
        self._objects: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def ordered_listing(self) -> bool:
        return self._ordered

    def get(self, key: str) -> StoredObject | None:
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            return None
        return StoredObject(key, entry.body, entry.etag, entry.last_modified, dict(entry.metadata))

    def get_bounded(self, key: str, max_bytes: int) -> StoredObject | None:
        """``get``, or ``ObjectTooLargeError`` for a body over ``max_bytes`` (``BoundedGetter``)."""
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            return None
        if len(entry.body) > max_bytes:
            raise ObjectTooLargeError(
                key,
                size=len(entry.body),
                etag=entry.etag,
                last_modified=entry.last_modified,
                limit=max_bytes,
            )
        return StoredObject(key, entry.body, entry.etag, entry.last_modified, dict(entry.metadata))

    def head(self, key: str) -> ObjectInfo | None:
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            return None
        return ObjectInfo(key, entry.etag, entry.last_modified, len(entry.body), entry.metadata)

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
        with self._lock:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise ConditionFailedError(key, retried=False)
            if if_match is not None and (current is None or current.etag != if_match):
                raise ConditionFailedError(key, missing=current is None, retried=False)
            now = self._now()
            self._objects[key] = _Entry(bytes(body), self._etag(body), now, dict(metadata or {}))
            return WriteResult(self._objects[key].etag, now)

    def _etag(self, body: bytes) -> str:
        """S3's ETag: the MD5 of the body in a standard bucket, a random string in a directory bucket.

        So, as on S3, two writes of the same bytes to a standard bucket have
        the same ETag, and an ``If-Match`` cannot tell them apart (ABA): the
        protocol never writes the same bytes twice to a key (every body
        carries a fresh write token), and the simulation checks it.
        """
        if not self._ordered:
            return f'"{self._random.getrandbits(128):032x}"'
        return f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        with self._lock:
            current = self._objects.get(key)
            if if_match is not None and (current is None or current.etag != if_match):
                raise ConditionFailedError(key, missing=current is None, retried=False)
            self._objects.pop(key, None)

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
            after = continuation or start_after
            if after is not None:
                keys = [k for k in keys if k > after]
            page = keys[:max_keys]
            items = tuple(
                ObjectInfo(k, e.etag, e.last_modified, len(e.body))
                for k in page
                for e in (self._objects[k],)
            )
            now = self._now()
        next_token = page[-1] if len(keys) > max_keys else None
        if not self._ordered:
            shuffled = list(items)
            self._random.shuffle(shuffled)
            items = tuple(shuffled)
        return ListPage(items, next_token, now)

    def list_prefixes(
        self,
        prefix: str,
        *,
        delimiter: str = "/",
        max_keys: int = 1000,
        continuation: str | None = None,
    ) -> PrefixPage:
        """As S3's ``ListObjectsV2`` with ``Delimiter``: each folder counts once toward ``max_keys``."""
        with self._lock:
            entries: dict[str, ObjectInfo | None] = {}
            for key in sorted(self._objects):
                if not key.startswith(prefix):
                    continue
                cut = key.find(delimiter, len(prefix))
                if cut >= 0:
                    entries.setdefault(key[: cut + len(delimiter)], None)
                else:
                    entry = self._objects[key]
                    entries[key] = ObjectInfo(key, entry.etag, entry.last_modified, len(entry.body))
            now = self._now()
        names = [name for name in entries if continuation is None or name > continuation]
        page = names[:max_keys]
        next_token = page[-1] if len(names) > max_keys else None
        return PrefixPage(
            tuple(name for name in page if entries[name] is None),
            tuple(info for name in page if (info := entries[name]) is not None),
            next_token,
            now,
        )

    def presign_get(self, key: str, expires_in: int) -> str:
        return f"memory://{self._bucket}/{key}?expires_in={expires_in}"

    def keys(self) -> builtins.list[str]:
        """Every key, sorted: a test helper."""
        with self._lock:
            return sorted(self._objects)
