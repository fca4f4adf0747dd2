"""A store with only the ``Store`` protocol's reads: no ``get_bounded``, no ``list_prefixes``.

A third-party store looks like this; wrappers that use the optional protocols
when the store has them (``pail.store.counting``) are tested over it.
"""

from __future__ import annotations

from typing import Any

from pail.store.base import ObjectInfo, StoredObject
from pail.store.memory import MemoryStore


class PlainStore:
    """Forwards to a ``MemoryStore`` but shows none of its optional methods to ``isinstance``."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.bucket = inner.bucket
        self.ordered_listing = True

    def get(self, key: str) -> StoredObject | None:
        return self._inner.get(key)

    def head(self, key: str) -> ObjectInfo | None:
        return self._inner.head(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
