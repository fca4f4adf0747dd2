"""A ``Store`` wrapper that runs a test's code just before chosen requests.

It forwards everything to a real store (the S3 store on the local server),
so the protocol meets a real server; the hooks only decide *when* another
actor acts, which is how a test pins down one interleaving exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pail.store.base import ListPage, ObjectInfo, Store, StoredObject, WriteResult


class SimulatedCrash(BaseException):
    """Raised by a hook to stop an actor dead, mid-protocol, like SIGKILL would."""


@dataclass
class _Hook:
    operation: str
    prefix: str
    action: Callable[[], None]
    remaining: int


class HookedStore:
    """Forwards to ``inner``; ``before(op, prefix, action)`` runs ``action`` before a matching request."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self._hooks: list[_Hook] = []

    def before(
        self, operation: str, prefix: str, action: Callable[[], None], *, times: int = 1
    ) -> None:
        self._hooks.append(_Hook(operation, prefix, action, times))

    def _fire(self, operation: str, key: str) -> None:
        for hook in self._hooks:
            if hook.remaining and hook.operation == operation and key.startswith(hook.prefix):
                hook.remaining -= 1
                hook.action()

    @property
    def bucket(self) -> str:
        return self._inner.bucket

    @property
    def ordered_listing(self) -> bool:
        return self._inner.ordered_listing

    def get(self, key: str) -> StoredObject | None:
        self._fire("get", key)
        return self._inner.get(key)

    def head(self, key: str) -> ObjectInfo | None:
        self._fire("head", key)
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
        self._fire("put", key)
        return self._inner.put(
            key,
            body,
            if_none_match=if_none_match,
            if_match=if_match,
            metadata=metadata,
            content_type=content_type,
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self._fire("delete", key)
        self._inner.delete(key, if_match=if_match)

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        self._fire("list", prefix)
        return self._inner.list(
            prefix, max_keys=max_keys, start_after=start_after, continuation=continuation
        )

    def presign_get(self, key: str, expires_in: int) -> str:
        return self._inner.presign_get(key, expires_in)
