"""A store that lists in no order, as an S3 Express directory bucket does.

``MemoryStore(ordered_listing=False)`` shuffles within each sorted page; a
directory bucket's order is arbitrary across the whole listing. This store
orders every listing by a salted hash of the key: an order unrelated to the
keys (a delayed or high-priority entry is anywhere in it, not first), stable
for a key, so continuation tokens walk it as S3's do, with each key present
throughout a walk returned once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

from pail.store.base import ListPage, ObjectInfo, PrefixPage
from pail.store.memory import MemoryStore


class ShuffledStore(MemoryStore):
    """A ``MemoryStore`` whose listings come in a salted-hash order, not key order."""

    def __init__(
        self,
        bucket: str = "express",
        *,
        salt: str = "",
        now: Callable[[], datetime] | None = None,
        seed: int | None = None,
    ) -> None:
        if now is None:
            super().__init__(bucket, ordered_listing=False, seed=seed)
        else:
            super().__init__(bucket, now=now, ordered_listing=False, seed=seed)
        self._salt = salt.encode()

    def _rank(self, key: str) -> str:
        return hashlib.sha256(self._salt + key.encode()).hexdigest() + key

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        # start_after has no meaning in a listing in no order (directory buckets refuse it).
        everything = super().list(prefix, max_keys=10**9)
        ranked = sorted(everything.items, key=lambda item: self._rank(item.key))
        if continuation is not None:
            ranked = [item for item in ranked if self._rank(item.key) > continuation]
        page: list[ObjectInfo] = ranked[:max_keys]
        token = self._rank(page[-1].key) if len(ranked) > max_keys else None
        return ListPage(tuple(page), token, everything.server_time)

    def list_prefixes(
        self,
        prefix: str,
        *,
        delimiter: str = "/",
        max_keys: int = 1000,
        continuation: str | None = None,
    ) -> PrefixPage:
        found = super().list_prefixes(prefix, delimiter=delimiter, max_keys=10**9)
        keys = sorted(found.keys, key=lambda item: self._rank(item.key))
        if continuation is not None:
            keys = [item for item in keys if self._rank(item.key) > continuation]
        page = keys[:max_keys]
        token = self._rank(page[-1].key) if len(keys) > max_keys else None
        return PrefixPage(found.prefixes, tuple(page), token, found.server_time)
