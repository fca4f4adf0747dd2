"""The storage port: the few object-store operations the protocol relies on.

Two implementations ship: ``S3Store`` (boto3, any S3-compatible server) and
``MemoryStore`` (in-process, for unit tests and simulation). One contract
suite (``tests/contract``) runs against both, so the fake cannot drift from
the real thing.

Semantics every implementation must honour:

* ``put(if_none_match=True)`` creates only if the key is absent, atomically.
* ``put(if_match=etag)`` replaces only if the current ETag is ``etag``.
* ``delete(if_match=etag)`` deletes only if the current ETag is ``etag``.
* A failed condition raises ``ConditionFailedError`` (``missing=True`` when
  the key does not exist); nothing is written. Stores that know whether a
  request was sent more than once say so (``retried``), so that a writer
  need not read back after a plain loss.
* Listings are strongly consistent; standard buckets list keys in byte order.
* Every response that carries one reports the server's clock
  (``server_time``), which is what lease expiry is judged by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a listing or a HEAD tells about an object."""

    key: str
    etag: str
    last_modified: datetime
    size: int
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object's body and what a GET tells about it."""

    key: str
    body: bytes
    etag: str
    last_modified: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The ETag a successful write produced, and the server time it answered.

    ``retried`` is True when the request had to be sent more than once: an
    earlier try may have been applied too, before this one.
    """

    etag: str
    server_time: datetime
    retried: bool = False


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a listing, in the server's order."""

    items: tuple[ObjectInfo, ...]
    next_token: str | None
    server_time: datetime


@runtime_checkable
class Store(Protocol):
    """An object store with conditional writes. See the module docstring."""

    @property
    def bucket(self) -> str: ...

    @property
    def ordered_listing(self) -> bool:
        """True when listings come back in byte order (false for directory buckets)."""
        ...

    def get(self, key: str) -> StoredObject | None:
        """The object, or None when it does not exist."""
        ...

    def head(self, key: str) -> ObjectInfo | None:
        """The object's metadata, or None when it does not exist."""
        ...

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
        """Write ``body``; with a condition, raise ``ConditionFailedError`` if it fails."""
        ...

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete ``key``. Without ``if_match`` a missing key is not an error."""
        ...

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        """One page of keys under ``prefix``."""
        ...

    def presign_get(self, key: str, expires_in: int) -> str:
        """A URL that lets anyone GET ``key`` for ``expires_in`` seconds."""
        ...


@runtime_checkable
class BoundedGetter(Protocol):
    """A store that can refuse to read a large body: the size comes with the GET's headers.

    One request, as ``get``: the body of an object over ``max_bytes`` is not
    read (the connection is dropped), and ``ObjectTooLargeError`` says its
    size. The dashboard reads foreign objects this way.
    """

    def get_bounded(self, key: str, max_bytes: int) -> StoredObject | None:
        """The object if it is at most ``max_bytes``; None if it does not exist."""
        ...


@dataclass(frozen=True, slots=True)
class PrefixPage:
    """One page of a delimited listing: the "folders" directly under a prefix, and its loose keys."""

    prefixes: tuple[str, ...]
    keys: tuple[ObjectInfo, ...]
    next_token: str | None
    server_time: datetime


@runtime_checkable
class PrefixLister(Protocol):
    """A store that can list the common prefixes under a prefix (S3's ``Delimiter``).

    Not part of ``Store``: the protocol never needs it. Operator tools
    (``pail.operate``) use it to find the queues in a bucket with one request
    per thousand folders instead of reading every key.
    """

    def list_prefixes(
        self,
        prefix: str,
        *,
        delimiter: str = "/",
        max_keys: int = 1000,
        continuation: str | None = None,
    ) -> PrefixPage:
        """One page of the prefixes (ending in ``delimiter``) and keys directly under ``prefix``."""
        ...
