"""Conditional writes that can tell "I lost" from "I already won".

A conditional PUT whose response is lost is retried (by botocore, or by us),
and the retry fails its condition against the write it made itself. Every
pail body carries a unique write token, repeated in the object's metadata;
after a failed condition we read the metadata back, and if the token is ours
the write did land.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pail.codec import META_WRITE
from pail.errors import ConditionFailedError
from pail.store.base import Store, WriteResult


@dataclass
class WriteStats:
    """Counts of conditional writes that lost, for benchmarks and tests."""

    failed_conditions: int = 0
    ambiguous_wins: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)

    def lost(self, reason: str) -> None:
        self.failed_conditions += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1


def put_conditional(
    store: Store,
    key: str,
    body: bytes,
    token: str,
    *,
    if_none_match: bool = False,
    if_match: str | None = None,
    metadata: dict[str, str] | None = None,
    stats: WriteStats | None = None,
    reason: str = "",
    read_back: bool = True,
) -> WriteResult | None:
    """Write ``body`` under a condition; the result if the write is ours, else None.

    ``token`` must be the write token inside ``body``; it also goes into the
    object's metadata, where a failed condition is checked against it.
    ``read_back=False`` never reads (an enqueue under a fresh id, by a
    producer that may only write): a failed condition returns None.
    """
    meta: dict[str, Any] = {**(metadata or {}), META_WRITE: token}
    try:
        return store.put(key, body, if_none_match=if_none_match, if_match=if_match, metadata=meta)
    except ConditionFailedError as exc:
        # Sent once, the request cannot have lost against its own write.
        current = store.head(key) if exc.retried and read_back else None
        if current is not None and current.metadata.get(META_WRITE) == token:
            if stats is not None:
                stats.ambiguous_wins += 1
            return WriteResult(current.etag, current.last_modified, retried=True)
        if stats is not None:
            stats.lost(reason or key.rsplit("/", 2)[-2])
        return None


def delete_if_unchanged(store: Store, key: str, etag: str) -> bool:
    """Delete ``key`` only if its ETag is still ``etag``; True if it is gone now.

    A missing key counts as deleted: a retried delete whose first try landed
    sees it missing.
    """
    try:
        store.delete(key, if_match=etag)
    except ConditionFailedError as exc:
        return exc.missing
    return True
