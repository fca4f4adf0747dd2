"""Where the reaper's next pass over ``run/`` starts, kept in the bucket.

A reaper pass reads a bounded number of pages of ``run/``, so that its cost
does not grow with the number of running jobs. To reach every lease anyway,
a pass starts where the previous one stopped, and that position is kept in
the bucket (``{namespace}/_pail/reap-cursor``), not in the process: a
one-shot ``pail reap``, a cron ``reap()`` or a cold reaper Lambda continues
the same walk. At the end of ``run/`` the walk starts again from the top.

The position is the last lease key the pass reached (``StartAfter``, in a
general purpose bucket's byte order) or, for a directory bucket (unordered,
no ``StartAfter``), the listing's continuation token.

Only a ``run/`` longer than one page needs a walk: a pass first reads the
top page, and touches the cursor only if there is more. A reaper then reads
the cursor once (a warm Lambda container, a loop calling ``reap()`` keep
their position in memory) and writes it whenever its position moved: 1 GET
per process, and 1 PUT per pass while ``run/`` holds more than one page.

The cursor is a hint, never a lock: a lost or garbled cursor only sends the
next pass back to the top, and two reapers racing on it only repeat some
leases. So reading it never fails a pass (an unreadable cursor is the top),
and writing it is compare-and-swap on the ETag last seen; its loss means
another reaper moved it, and this one reads it again on its next pass. A
failed write is logged and the pass still counts.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pail.codec import dumps
from pail.errors import PailError
from pail.ids import new_token
from pail.keys import RUN, Keys
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store

log = logging.getLogger("pail")

MAX_POSITION = 2048
"""Longer stored positions are not ours: S3 keys are at most 1,024 bytes."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a pass starts: after a key, from a continuation token, or at the top (neither)."""

    after: str | None = None
    token: str | None = None

    @property
    def at_top(self) -> bool:
        return self.after is None and self.token is None


TOP = Position()


@dataclass(frozen=True, slots=True)
class _Cursor:
    position: Position
    write: str = field(default_factory=new_token)

    def encode(self) -> bytes:
        data: dict[str, object] = {"v": 1, "w": self.write}
        if self.position.after is not None:
            data["after"] = self.position.after
        if self.position.token is not None:
            data["token"] = self.position.token
        return dumps(data)


def decode(body: bytes, keys: Keys) -> Position:
    """The position in a cursor object's bytes; the top for anything that is not a valid cursor.

    >>> decode(b'{"v": 1, "after": "run/01J0000000000000000000000A", "w": "x"}', Keys()).after
    'run/01J0000000000000000000000A'
    >>> decode(b"not json", Keys()).at_top, decode(b'{"after": "queue/x"}', Keys()).at_top
    (True, True)
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return TOP
    if not isinstance(data, dict):
        return TOP
    after, token = data.get("after"), data.get("token")
    if isinstance(after, str) and len(after) <= MAX_POSITION and after.startswith(keys.prefix(RUN)):
        return Position(after=after)
    if isinstance(token, str) and 0 < len(token) <= MAX_POSITION:
        return Position(token=token)
    return TOP


class ReapCursor:
    """Loads and saves the reaper's position in ``keys.reap_cursor()``."""

    def __init__(self, store: Store, keys: Keys, *, stats: WriteStats | None = None) -> None:
        self._store = store
        self._keys = keys
        self._stats = stats
        self._etag: str | None = None

    @property
    def key(self) -> str:
        return self._keys.reap_cursor()

    def load(self) -> Position:
        """The stored position (1 GET), or the top if there is none or it cannot be read."""
        self._etag = None
        try:
            found = self._store.get(self.key)
        except PailError as exc:
            log.warning("reaper: cannot read its cursor, starting from the top: %s", exc)
            return TOP
        if found is None:
            return TOP
        self._etag = found.etag
        return decode(found.body, self._keys)

    def save(self, position: Position) -> bool:
        """Store ``position`` (1 PUT); False if another reaper moved the cursor since we read it."""
        cursor = _Cursor(position)
        try:
            written = put_conditional(
                self._store,
                self.key,
                cursor.encode(),
                cursor.write,
                if_none_match=self._etag is None,
                if_match=self._etag,
                stats=self._stats,
                reason="reap-cursor",
            )
        except PailError as exc:
            log.warning("reaper: cannot save its cursor: %s", exc)
            return True  # a fresh process repeats this pass's pages: nothing is skipped
        if written is None:
            log.info("reaper: another reaper moved the cursor meanwhile; following it")
            return False
        self._etag = written.etag
        return True
