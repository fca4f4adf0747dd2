"""What an object under a queue's prefixes is: a job (which one, in which state) or foreign.

The operator reads classify keys without trusting them. A key is a job's
when the part after its state prefix is one key segment (pail's ULIDs and
pailq 0.1.1's ids alike); anything else (a zero-byte folder marker
``queue/``, ``queue/photos/cat.jpg``) is foreign and shown as such.

Reading a body (``detail``) never raises on bad bytes: the decoders of
``pail.codec`` are used as they are, and any way they reject the bytes
becomes ``JobDetail.unreadable``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pail.codec import (
    MESSAGE_LIMIT,
    META_OUTCOME,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    TRACEBACK_LIMIT,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
)
from pail.errors import DecodeError, ObjectTooLargeError
from pail.keys import DLQ, DONE, QUEUE, RUN, WAIT, Keys
from pail.protocol import delay
from pail.protocol.dependencies.record import WaitingJob
from pail.store.base import ObjectInfo, Store

MARKER_MAX_BYTES = 64
"""A ``done/`` object this small may be a dead or cancelled marker (``null``
plus, at most, a write token): one HEAD tells. A larger one is a result."""

# What a decoder may raise on hostile bytes. pail.codec's decoders raise
# DecodeError; older ones let int()/float() errors through on odd values
# (pailq 0.1.1 writes NaN), and deep nesting can exhaust recursion.
_DECODE_ERRORS = (DecodeError, ValueError, TypeError, RecursionError, OverflowError)


class JobKind(StrEnum):
    """The states an operator lists jobs by."""

    PENDING = "pending"
    DELAYED = "delayed"
    WAITING = "waiting"
    """Waiting for its dependencies (``wait/``, ``pail.protocol.dependencies``)."""
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


FOREIGN = "foreign"
"""The state shown for an object that is not a pail job."""

PREFIX_OF: dict[JobKind, str] = {
    JobKind.PENDING: QUEUE,
    JobKind.DELAYED: QUEUE,
    JobKind.WAITING: WAIT,
    JobKind.RUNNING: RUN,
    JobKind.DONE: DONE,
    JobKind.DEAD: DLQ,
    JobKind.CANCELLED: DONE,
}


def job_id_of(keys: Keys, key: str) -> str | None:
    """The job id a key under a state prefix names, or None for a foreign object.

    >>> job_id_of(Keys(), "queue/01J0000000000000000000000A")
    '01J0000000000000000000000A'
    >>> job_id_of(Keys(), "queue/!1767225600000-01J0000000000000000000000A")
    '01J0000000000000000000000A'
    >>> job_id_of(Keys(), "queue/") is None, job_id_of(Keys(), "queue/a/b") is None
    (True, True)
    """
    try:
        rest = keys.job_id(key)
    except ValueError:
        return None
    delayed = delay.parse(keys, key)
    if delayed is not None:
        return delayed[1] if "/" not in delayed[1] else None
    if not rest or "/" in rest:
        return None
    return rest


def due_of(keys: Keys, key: str) -> datetime | None:
    """When a delayed entry becomes claimable, or None for any other key."""
    parsed = delay.parse(keys, key)
    if parsed is None:
        return None
    try:
        return datetime.fromtimestamp(parsed[0] / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class JobDetail:
    """What a job's body says, or why it could not be read (``unreadable``)."""

    attempts: int | None = None
    holder: str | None = None
    lease_state: str | None = None
    progress: Any = None
    error: ErrorInfo | None = None
    payload: Any = None
    cancelled: bool = False
    raw: str | None = None
    unreadable: str | None = None
    waits_for: int | None = None
    """A waiting job's dependencies not known to have succeeded yet (of ``dependencies``)."""
    dependencies: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "waits_for": self.waits_for,
            "dependencies": self.dependencies,
            "attempts": self.attempts,
            "holder": self.holder,
            "lease_state": self.lease_state,
            "progress": self.progress,
            "error": self.error.to_json() if self.error else None,
            "cancelled": self.cancelled,
            "unreadable": self.unreadable,
        }


def _excerpt(body: bytes, limit: int = 2000) -> str:
    return body[:limit].decode("utf-8", errors="replace")


def decode_detail(prefix: str, body: bytes, job_id: str) -> JobDetail:
    """Decode the body of an object under ``prefix`` (a state prefix); never raises.

    >>> decode_detail(QUEUE, b"not json", "J").unreadable
    'pending job is not JSON: Expecting value: line 1 column 1 (char 0)'
    """
    try:
        if prefix == QUEUE:
            envelope = Envelope.decode(body)
            return JobDetail(
                attempts=envelope.attempts,
                error=envelope.last_error,
                payload=envelope.payload,
                cancelled=envelope.cancelled,
            )
        if prefix == RUN:
            lease = LeaseRecord.decode(body, job_id)
            return JobDetail(
                attempts=lease.attempt,
                holder=lease.owner,
                lease_state=lease.state,
                progress=lease.progress,
                error=lease.error,
                payload=lease.payload,
            )
        if prefix == DLQ:
            letter = DeadLetter.decode(body, job_id)
            return JobDetail(
                attempts=letter.attempts, error=letter.error, payload=letter.payload, raw=letter.raw
            )
        if prefix == WAIT:
            waiting = WaitingJob.decode(body, job_id)
            return JobDetail(
                payload=waiting.payload,
                waits_for=len(set(waiting.after) - set(waiting.met)),
                dependencies=len(waiting.after),
            )
    except _DECODE_ERRORS as exc:
        return JobDetail(unreadable=str(exc) or type(exc).__name__, raw=_excerpt(body))
    return JobDetail()


class _Lru[K, V]:
    """A small thread-safe LRU map: the dashboard's caches must not grow without bound."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _cut(text: str | None) -> str | None:
    return text[:MESSAGE_LIMIT] if isinstance(text, str) else text


def _slim_progress(progress: Any) -> Any:
    """What views show of a progress value (numbers, ``done``/``total``/``message``), bounded."""
    if progress is None or isinstance(progress, bool | int | float):
        return progress
    if isinstance(progress, dict):
        kept = {
            k: progress[k] for k in ("done", "total") if isinstance(progress.get(k), int | float)
        }
        if isinstance(progress.get("message"), str):
            kept["message"] = progress["message"][:MESSAGE_LIMIT]
        return kept
    return str(progress)[:MESSAGE_LIMIT]


class Reader:
    """Reads bodies and outcomes for operator views, caching by (key, ETag).

    An object's bytes never change under one ETag, so a cached read is never
    stale: a lease renewed since is a new ETag and is read again. Dead letters,
    results and waiting entries are read once for the life of the reader.
    """

    def __init__(
        self, store: Store, *, cache_size: int = 20_000, keep_payloads: bool = True
    ) -> None:
        self.store = store
        self.keep_payloads = keep_payloads
        """False: details come without their payload, and with an error cut to
        ``MESSAGE_LIMIT``/``TRACEBACK_LIMIT`` (what pail writes), so that the cache's
        memory is bounded by its size, not by what a bucket writer chose (the dashboard)."""
        self._details: _Lru[tuple[str, str], JobDetail] = _Lru(cache_size)
        self._outcomes: _Lru[tuple[str, str], str] = _Lru(cache_size)

    def _slim(self, detail: JobDetail) -> JobDetail:
        if self.keep_payloads:
            return detail
        error = detail.error
        if error is not None:
            error = replace(
                error,
                type=error.type[:MESSAGE_LIMIT],
                message=error.message[:MESSAGE_LIMIT],
                traceback=error.traceback[:TRACEBACK_LIMIT],
            )
        return replace(
            detail,
            payload=None,
            error=error,
            holder=_cut(detail.holder),
            lease_state=_cut(detail.lease_state),
            progress=_slim_progress(detail.progress),
            raw=_cut(detail.raw),
        )

    def detail(self, keys: Keys, info: ObjectInfo, prefix: str) -> JobDetail | None:
        """The decoded body of ``info`` (one GET unless cached); None if it is gone."""
        cached = self._details.get((info.key, info.etag))
        if cached is not None:
            return cached
        try:
            obj = self.store.get(info.key)
        except ObjectTooLargeError as exc:  # a store that bounds its reads (the dashboard's)
            found = JobDetail(unreadable=f"{exc.size:,} bytes: too large to read here")
            self._details.put((info.key, exc.etag), found)
            return found
        if obj is None:
            return None
        job_id = job_id_of(keys, info.key) or info.key
        found = self._slim(decode_detail(prefix, obj.body, job_id))
        self._details.put((info.key, obj.etag), found)
        return found

    def outcome(self, info: ObjectInfo, *, budget: Callable[[], bool] | None = None) -> str | None:
        """``succeeded``, ``cancelled`` or ``dead`` for a ``done/`` object; None if unknown.

        Objects larger than any marker are results, at no request. A small
        one costs one HEAD (then cached), if ``budget()`` allows it; when it
        does not, the outcome is unknown (None) and the caller reports a
        lower bound.
        """
        if info.size > MARKER_MAX_BYTES:
            return OUTCOME_SUCCEEDED
        cached = self._outcomes.get((info.key, info.etag))
        if cached is not None:
            return cached
        if budget is not None and not budget():
            return None
        head = self.store.head(info.key)
        if head is None:
            return None
        # No pail metadata: written by pailq 0.1.1, a success.
        outcome = head.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
        if outcome not in (OUTCOME_SUCCEEDED, OUTCOME_DEAD, OUTCOME_CANCELLED):
            outcome = OUTCOME_SUCCEEDED
        self._outcomes.put((info.key, head.etag), outcome)
        return outcome


class Budget:
    """A countdown of optional requests (HEADs) one read may spend."""

    def __init__(self, requests: int) -> None:
        self.left = requests
        self.exhausted = False

    def __call__(self) -> bool:
        if self.left <= 0:
            self.exhausted = True
            return False
        self.left -= 1
        return True
