"""Pausing a queue: a marker object that every claimer looks for once per page refill.

While ``{namespace}/_pail/paused`` exists, claimers take no job: a worker's
refill that finds candidates in its listing of ``queue/`` then HEADs the
marker, and if it is there drops the page and claims nothing. ``pail pause``
writes it, ``pail resume`` deletes it (``docs/protocol.md``, "Pause and
resume", has the crash analysis).

* **Presence is the pause.** Whatever the object's bytes (pail's JSON, an
  empty object someone made with another tool, garbage), it pauses the
  queue: the check is a HEAD and never reads the body. The body only says,
  to a person, who paused it, when and why; a body that does not decode is
  shown as "paused (no details)", never an error.
* **Cost**: one HEAD per page refill that found something to claim; nothing
  on a refill that found the queue empty, nothing per claim. A paused
  queue's idle worker pays the LIST and the HEAD of each poll.
* **Honoured within one refill**: a worker claims on from the page it holds
  until it lists again (at most ``page_size`` claims, and a page is never
  older than the visibility timeout); jobs already claimed run to their
  end. Resuming is seen at each claimer's next refill (for an idle worker,
  its next poll).
* Running jobs, heartbeats, settling and the reaper go on: a paused queue's
  expired leases are still requeued (and wait), and the reaper Lambda's
  self-heal does not wake a worker for it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pail.codec import dumps
from pail.errors import AccessDeniedError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store

log = logging.getLogger("pail")

MAX_TEXT = 500
"""The longest ``reason`` or ``by`` pail writes or shows; a longer stored one is cut."""


@dataclass(frozen=True, slots=True)
class PauseState:
    """A paused queue's marker, as far as it can be read.

    ``paused_at`` is the marker's ``LastModified`` (the server's clock);
    ``by`` and ``reason`` are what the pauser wrote, or None when the marker
    holds anything else (foreign bytes still pause the queue).
    """

    key: str
    paused_at: datetime
    by: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "paused": True,
            "paused_at": self.paused_at.isoformat(),
            "by": self.by,
            "reason": self.reason,
        }


def encode(*, by: str, reason: str | None) -> tuple[bytes, str]:
    """The marker's body and its write token.

    >>> body, token = encode(by="ops", reason="deploy")
    >>> json.loads(body)["reason"], json.loads(body)["w"] == token
    ('deploy', True)
    """
    token = new_token()
    data: dict[str, Any] = {"v": 1, "paused": True, "by": by[:MAX_TEXT], "w": token}
    if reason:
        data["reason"] = reason[:MAX_TEXT]
    return dumps(data), token


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) and value else None


def decode(body: bytes) -> tuple[str | None, str | None]:
    """``(by, reason)`` from a marker's bytes; ``(None, None)`` for anything pail did not write.

    >>> decode(b'{"v": 1, "by": "ops", "reason": "deploy"}'), decode(b"\\xff"), decode(b"[1]")
    (('ops', 'deploy'), (None, None), (None, None))
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    return _text(data.get("by")), _text(data.get("reason"))


def pause(
    store: Store,
    keys: Keys,
    *,
    by: str,
    reason: str | None = None,
    stats: WriteStats | None = None,
) -> bool:
    """Pause the queue: create the marker (create-only PUT). False if it was paused already.

    An existing marker is kept as it is (its time and reason are the first
    pauser's). One request.
    """
    body, token = encode(by=by, reason=reason)
    written = put_conditional(
        store, keys.paused(), body, token, if_none_match=True, stats=stats, reason="pause"
    )
    return written is not None


def resume(store: Store, keys: Keys) -> bool:
    """Resume the queue: delete the marker. False if it was not paused.

    A HEAD (to say whether it was paused), then an unconditional DELETE:
    resuming removes whatever marker is there, pail's or another writer's.
    """
    if store.head(keys.paused()) is None:
        return False
    store.delete(keys.paused())
    return True


def is_paused(store: Store, keys: Keys) -> bool:
    """True while the marker exists (one HEAD): what a claimer's refill asks."""
    return store.head(keys.paused()) is not None


def read(store: Store, keys: Keys) -> PauseState | None:
    """The marker's details (one GET), or None if the queue is not paused."""
    found = store.get(keys.paused())
    if found is None:
        return None
    by, reason = decode(found.body)
    return PauseState(found.key, found.last_modified, by, reason)


class PauseCheck:
    """A claimer's look at the marker, once per refill; it never stops a worker loop.

    A storage error propagates like a failed listing (the drain backs off
    or stops as for any claim). A role that may not read the marker (an
    older deployment's grants) cannot honour a pause: that is logged once,
    and the queue counts as not paused.
    """

    def __init__(self, store: Store, keys: Keys) -> None:
        self._store = store
        self._keys = keys
        self._denied_logged = False
        self.checks = 0

    def __call__(self) -> bool:
        self.checks += 1
        try:
            return is_paused(self._store, self._keys)
        except AccessDeniedError as exc:
            if not self._denied_logged:
                self._denied_logged = True
                log.warning(
                    "cannot read the pause marker %s, so pausing this queue has no effect on "
                    "this worker (grant it s3:GetObject and s3:ListBucket on that key): %s",
                    self._keys.paused(),
                    exc,
                )
            return False
