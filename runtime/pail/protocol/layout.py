"""The layout marker: a queue's shard count, kept in the bucket for processes not told it.

A sharded queue's keys sit one segment deeper (``queue/{s}/{id}``), so a
process that reads it as one shard (``pail stats`` without ``--shards``, a
worker without ``PAIL_SHARDS``) would see it empty. The marker
``{namespace}/_pail/shards`` holds the count, as JSON with a write token::

    {"v": 1, "shards": 16, "w": "<token>"}

* ``publish``: a ``Pail`` given a count above 1 explicitly (argument,
  ``PAIL_SHARDS``, ``--shards``) writes it before its first enqueue, claim
  or reap: 1 GET, and 1 conditional PUT when the marker is missing
  (``If-None-Match``) or smaller (``If-Match`` its ETag: a queue grows).
  A larger marker is left alone (shrinking is not supported): the process
  logs that it claims shards ``0..N-1`` and the flat layout only.
* ``discover``: a ``Pail`` not given a count reads the marker once (1 GET)
  and uses its count; no marker is one shard, today's layout and pailq
  0.1.1's.

The marker is a hint about where to look, never a lock: a job's keys do not
depend on it (a job keeps the shard it was written in, and readers try the
smaller counts' shards too), so a marker larger than the jobs only costs
readers a few more places to look. It is input like any object in the
bucket: bytes that are not a marker read as "unknown" (logged; one shard,
and a publisher replaces them ``If-Match``); a reader that may not read it
(a producer granted ``queue/*`` only) reads one shard, logged; a publisher
that may not write it goes on, logged (the reaper, which may, writes it).
A storage error is raised to the operation that needed the layout and
nothing is cached, so the next operation asks again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pail.codec import dumps
from pail.errors import AccessDeniedError
from pail.ids import new_token
from pail.keys import Keys, validate_shards
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store

log = logging.getLogger("pail")

VERSION = 1
MAX_MARKER_BYTES = 1024
"""A longer marker is not ours (one is about 60 bytes)."""
PUBLISH_ROUNDS = 3
"""Conditional writes a publish tries before leaving the marker to the racing writers."""


@dataclass(frozen=True, slots=True)
class _Body:
    shards: int
    write: str = field(default_factory=new_token)

    def encode(self) -> bytes:
        return dumps({"v": VERSION, "shards": self.shards, "w": self.write})


def decode(body: bytes) -> int | None:
    """The shard count in a marker's bytes, or None for bytes that are not a marker.

    >>> decode(b'{"v": 1, "shards": 16, "w": "x"}')
    16
    >>> decode(b"not json"), decode(b'{"v": 1, "shards": 3}'), decode(b'{"v": 2, "shards": 4}')
    (None, None, None)
    """
    if len(body) > MAX_MARKER_BYTES:
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return None
    shards = data.get("shards")
    try:
        return validate_shards(shards)  # type: ignore[arg-type]  # checked: anything goes in
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Marker:
    """A marker as found: its count (None if its bytes are not a marker) and its ETag."""

    shards: int | None
    etag: str


def read(store: Store, keys: Keys) -> Marker | None:
    """The marker of ``keys``' queue (1 GET), or None if there is none."""
    found = store.get(keys.layout_marker())
    if found is None:
        return None
    return Marker(decode(found.body), found.etag)


def discover(store: Store, keys: Keys) -> int:
    """The shard count the marker records (1 GET); 1 without a readable marker.

    Raises ``StorageError`` when the store fails: the caller asks again later.

    >>> from pail.store import MemoryStore
    >>> store = MemoryStore("jobs")
    >>> discover(store, Keys()), publish(store, Keys(), 8), discover(store, Keys())
    (1, 8, 8)
    """
    try:
        found = read(store, keys)
    except AccessDeniedError as exc:
        log.warning(
            "cannot read the queue's layout marker %s, reading the queue as one shard "
            "(pass shards= or set PAIL_SHARDS): %s",
            keys.layout_marker(),
            exc,
        )
        return 1
    if found is None:
        return 1
    if found.shards is None:
        log.warning(
            "the layout marker %s is not one pail writes; reading the queue as one shard "
            "(pass shards= or set PAIL_SHARDS)",
            keys.layout_marker(),
        )
        return 1
    return found.shards


def publish(store: Store, keys: Keys, shards: int, *, stats: WriteStats | None = None) -> int:
    """Record ``shards`` in the marker unless it records as many or more; return the count it holds.

    1 GET, then 1 conditional PUT if the marker is missing, smaller or
    unreadable; a lost condition (another publisher) reads it again, at most
    ``PUBLISH_ROUNDS`` times. A larger count is never shrunk: a warning says
    this process claims fewer shards. Returns ``shards`` also when this
    process may not write the marker (logged) or the rounds ran out.
    Raises ``StorageError`` when the store fails.
    """
    shards = validate_shards(shards)
    key = keys.layout_marker()
    try:
        for _ in range(PUBLISH_ROUNDS):
            found = read(store, keys)
            if found is not None and found.shards is not None and found.shards >= shards:
                if found.shards > shards:
                    log.warning(
                        "queue %s has %d shards but this process uses %d: it claims and "
                        "counts the flat layout and shards 0..%d only (pass shards=%d)",
                        keys.root or "(default)",
                        found.shards,
                        shards,
                        shards - 1,
                        found.shards,
                    )
                return found.shards
            if found is not None and found.shards is None:
                log.warning("replacing the layout marker %s: not one pail writes", key)
            body = _Body(shards)
            written = put_conditional(
                store,
                key,
                body.encode(),
                body.write,
                if_none_match=found is None,
                if_match=None if found is None else found.etag,
                stats=stats,
                reason="layout",
            )
            if written is not None:
                return shards
    except AccessDeniedError as exc:
        log.info("cannot write the layout marker %s (left to the reaper): %s", key, exc)
        return shards
    log.warning("the layout marker %s kept changing; left to the other writers", key)
    return shards
