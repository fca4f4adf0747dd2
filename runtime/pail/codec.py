"""The bytes of every object pail writes, versioned, and their decoding.

Bodies are JSON. The pending envelope keeps pailq 0.1.1's shape
(``{"payload": ..., "attempts": n}``) and only adds fields, so jobs written by
either version can be read by the other. A result is stored as the handler's
return value itself, again as in 0.1.1.

Every body carries a fresh write token (``"w"``): two writes never produce
the same bytes, so an ETag names one write, never a value that could come back
(no ABA on compare-and-swap).
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Self

from pail import jsonsafe
from pail.bounds import MAX_COUNT, MAX_RETRY_DELAY
from pail.errors import DecodeError, PayloadError
from pail.ids import new_token
from pail.keys import MAX_ID_LENGTH
from pail.tags import Tags, read_tags

FORMAT_VERSION = 1
TRACEBACK_LIMIT = 4000
MESSAGE_LIMIT = 2000
RAW_LIMIT = 1_000_000
"""Bytes of a foreign object kept in the dead letter that quarantines it (the rest is cut)."""

# Object metadata (x-amz-meta-*) pail sets; S3 lower-cases the names.
META_WRITE = "pail-write"
META_OUTCOME = "pail-outcome"
META_ATTEMPT = "pail-attempt"
META_LIFE = "pail-life"
"""On ``done/{id}``: the life of the job the outcome ends (its ``redriven`` count; 0 if absent)."""
META_TAGS = "pail-tags"
"""On ``done/{id}`` of a tagged job: its tags, URL-encoded (``pail.tags.encode_metadata``)."""
OUTCOME_SUCCEEDED = "succeeded"
OUTCOME_DEAD = "dead"
OUTCOME_CANCELLED = "cancelled"
OUTCOME_HEADER = f"x-amz-meta-{META_OUTCOME}"
"""The outcome as an HTTP response header: what a browser reads (CORS must expose it)."""

# The body of a done/{id} marker (a dead or cancelled job) is JSON null, so
# that pailq 0.1.1's result() (``json.loads``) reads it as "no result"; a
# handler's None is stored as {} (as in 0.1.1), so null can only mean that.
# After the null, the marker's write token is spelled in JSON's insignificant
# whitespace, two bits per byte, so that every marker's bytes, and so its
# ETag (an MD5 of the bytes in a standard bucket), name one write: a
# compare-and-swap on a marker can never match another marker.
MARKER_VALUE = b"null"
_WHITESPACE_DIGITS = b" \t\n\r"


def life_of(metadata: Mapping[str, str]) -> int:
    """The life an outcome under ``done/`` ends, from its metadata: 0 before any redrive.

    >>> life_of({META_LIFE: "2"}), life_of({})
    (2, 0)
    """
    text = metadata.get(META_LIFE, "0")
    return int(text) if text.isdigit() else 0


def marker_body(token: str) -> bytes:
    """The bytes of a dead or cancelled marker: JSON ``null``, unique per ``token`` (hex).

    >>> import json
    >>> body = marker_body("0f")
    >>> json.loads(body) is None, body != marker_body("f0"), len(body)
    (True, True, 8)
    """
    digits = [d for hex_digit in token for d in divmod(int(hex_digit, 16), 4)]
    return MARKER_VALUE + bytes(_WHITESPACE_DIGITS[d] for d in digits)


def marker_token(body: bytes) -> str | None:
    """The write token spelled in a marker's whitespace (None if ``body`` is no such marker).

    >>> marker_token(marker_body("c0ffee")), marker_token(b"null")
    ('c0ffee', None)
    """
    tail = body[len(MARKER_VALUE) :]
    if not body.startswith(MARKER_VALUE) or not tail or len(tail) % 2:
        return None
    if any(byte not in _WHITESPACE_DIGITS for byte in tail):
        return None
    digits = [_WHITESPACE_DIGITS.index(byte) for byte in tail]
    return "".join(
        f"{high * 4 + low:x}" for high, low in zip(digits[::2], digits[1::2], strict=True)
    )


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
MAX_TRACESTATE = 512


def read_trace(value: object) -> dict[str, str]:
    """A W3C trace context read back from the bucket (``pail.tracing``): valid, else ``{}``.

    Only ``traceparent`` and ``tracestate``; anything else, or either malformed, is dropped.

    >>> read_trace({"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})["traceparent"][:5]
    '00-aa'
    >>> read_trace({"traceparent": "<script>"}), read_trace("junk")
    ({}, {})
    """
    if not isinstance(value, dict):
        return {}
    parent = value.get("traceparent")
    if not isinstance(parent, str) or not _TRACEPARENT.match(parent):
        return {}
    carrier = {"traceparent": parent}
    state = value.get("tracestate")
    if (
        isinstance(state, str)
        and 0 < len(state) <= MAX_TRACESTATE
        and state.isascii()
        and state.isprintable()
    ):
        carrier["tracestate"] = state
    return carrier


_MARKER_SIZES = frozenset({len(MARKER_VALUE), len(marker_body(new_token()))})


def might_be_marker(size: int) -> bool:
    """True if a ``done/`` object of ``size`` bytes may be a dead or cancelled marker.

    ``stats`` HEADs only those (a listing gives sizes, not metadata): a
    marker is ``null`` and its write token (36 bytes), or a bare ``null``
    (written before markers carried tokens).
    """
    return size in _MARKER_SIZES


def dumps(value: Any) -> bytes:
    """Compact strict JSON, or ``PayloadError`` naming what could not be encoded."""
    return jsonsafe.dumps(value)


def check_carried(payload: Any) -> None:
    """Raise ``PayloadError`` unless pail can carry ``payload`` in the objects it writes.

    A payload read from a foreign entry may hold what pail never writes:
    pailq 0.1.1 writes ``NaN`` and ``Infinity`` as bare words. Such a job
    cannot be leased (the lease carries the payload), so it is quarantined.
    """
    try:
        jsonsafe.check_value(payload, "payload")
    except PayloadError as exc:
        raise PayloadError(
            f"{exc}; pail writes strict JSON only, so it cannot carry this job "
            "(pailq 0.1.1 writes NaN and Infinity as bare words)"
        ) from None


def raw_text(body: bytes) -> str:
    """A foreign object's bytes as text for its dead letter: UTF-8 where it is, cut at ``RAW_LIMIT``."""
    text = body[:RAW_LIMIT].decode("utf-8", errors="replace")
    return text if len(body) <= RAW_LIMIT else f"{text}... ({len(body)} bytes in all)"


def _show(value: Any) -> str:
    try:
        shown = repr(value)
    except ValueError:  # an integer past the digit limit
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= 60 else shown[:57] + "..."


MAX_EDGES = 1000
"""The most dependencies (or dependents) one job may name (``pail.protocol.dependencies``)."""


def _is_job_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and "/" not in value


class _Fields:
    """Typed reads of one decoded JSON object: a field of the wrong type is a ``DecodeError``.

    pail's objects only ever hold these types, so anything else was written
    by someone else, and the object is not one pail can act on.
    """

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, dict):
            raise DecodeError(f"{what} is not a JSON object but {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.what = what

    def _bad(self, name: str, expected: str) -> DecodeError:
        return DecodeError(
            f"{self.what} has an invalid {name!r}: {_show(self.data[name])} (expected {expected})"
        )

    def count(self, name: str) -> int:
        """A non-negative integer (default 0); booleans and floats are refused."""
        value = self.data.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise self._bad(name, f"an integer from 0 to {MAX_COUNT}")
        return value

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.data.get(name, default)
        if value is not None and not isinstance(value, str):
            raise self._bad(name, "a string")
        return value

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        if not isinstance(value, bool):
            raise self._bad(name, "true or false")
        return value

    def seconds(self, name: str, limit: float) -> float:
        value = self.data.get(name, 0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= limit  # before float(): a huge int would overflow it
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise self._bad(name, f"a number of seconds from 0 to {limit:g}")
        return float(value)

    def timestamp(self, name: str) -> str | None:
        """An ISO 8601 time, kept as written."""
        value = self.text(name)
        if value:
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise self._bad(name, "an ISO 8601 time") from None
        return value or None

    def error(self, name: str) -> ErrorInfo | None:
        return ErrorInfo.from_json(self.data.get(name), f"{self.what}'s {name!r}")

    def ids(self, name: str) -> tuple[str, ...]:
        """A list of job ids (default empty): dependencies (``after``) or dependents (``then``)."""
        value = self.data.get(name, [])
        if (
            not isinstance(value, list)
            or len(value) > MAX_EDGES
            or not all(_is_job_id(item) for item in value)
        ):
            raise self._bad(name, f"a list of at most {MAX_EDGES} job ids")
        return tuple(value)

    def job_id(self, job_id: str) -> str:
        """The id the object names, which must be the id its key names (pailq 0.1.1 names none)."""
        named = self.text("id", job_id)
        if named != job_id:
            raise self._bad("id", f"{job_id!r}, the id in its key")
        return job_id


def _plain_frames(exc: BaseException) -> list[str]:
    """The traceback's frames as ``format_tb`` writes them, without the ``^^^`` markers.

    Python 3.13 finds those markers by parsing each frame's source line: most of
    the cost of recording an error (an 8-frame traceback took 850 to 920 us to
    format with them, 160 to 220 us to record without). The file, line, function
    and source line of every frame stay.
    """
    plain = [
        traceback.FrameSummary(f.filename, f.lineno, f.name, lookup_line=False, line=f.line)
        for f in traceback.extract_tb(exc.__traceback__)
    ]
    return traceback.StackSummary.from_list(plain).format()


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why an attempt failed: the exception's type, message and a truncated traceback."""

    type: str
    message: str
    traceback: str = ""
    attempt: int = 0

    @classmethod
    def from_exception(cls, exc: BaseException, attempt: int = 0) -> ErrorInfo:
        """Record ``exc``; the traceback keeps its innermost frames and always its last line."""
        message = str(exc)[:MESSAGE_LIMIT]
        last = f"{type(exc).__name__}: {message}\n"
        frames = "".join(_plain_frames(exc))
        room = max(0, TRACEBACK_LIMIT - len(last))
        if len(frames) > room:
            frames = "...\n" + frames[-room:]
        return cls(
            type(exc).__name__,
            message,
            f"Traceback (most recent call last):\n{frames}{last}",
            attempt,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "traceback": self.traceback,
            "attempt": self.attempt,
        }

    @classmethod
    def from_json(cls, data: Any, what: str = "error") -> ErrorInfo | None:
        """The error recorded in a decoded object; None for null, ``DecodeError`` for anything but an object."""
        if data is None:
            return None
        fields = _Fields(data, what)
        return cls(
            fields.text("type", "Error") or "Error",
            fields.text("message", "") or "",
            fields.text("traceback", "") or "",
            fields.count("attempt"),
        )

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(frozen=True, slots=True)
class Envelope:
    """A pending job: the body of ``queue/{id}``.

    ``attempts`` counts the attempts already started, so the next claim runs
    attempt ``attempts + 1``.
    """

    payload: Any
    attempts: int = 0
    enqueued_at: str | None = None
    last_error: ErrorInfo | None = None
    redriven: int = 0
    write: str = field(default_factory=new_token)
    cancelled: bool = False
    """Set by ``cancel``: the claim that reads it finishes the cancellation instead of running it."""
    tags: Tags = field(default_factory=dict)
    """The producer's tags (``pail.tags``); pailq 0.1.1 reads past the field."""
    trace: dict[str, str] = field(default_factory=dict)
    """The producer's W3C trace context (``pail.tracing``), when it was traced."""
    after: tuple[str, ...] = ()
    """The jobs this one waited for (``pail.protocol.dependencies``): a handler reads their results."""
    then: tuple[str, ...] = ()
    """The jobs waiting for this one: whoever ends it tells them (``pail.protocol.dependencies``)."""

    def encode(self) -> bytes:
        data: dict[str, Any] = {"payload": self.payload, "attempts": self.attempts}
        data["v"] = FORMAT_VERSION
        if self.enqueued_at:
            data["enqueued_at"] = self.enqueued_at
        if self.tags:
            data["tags"] = self.tags
        if self.trace:
            data["trace"] = self.trace
        if self.last_error:
            data["last_error"] = self.last_error.to_json()
        if self.redriven:
            data["redriven"] = self.redriven
        if self.cancelled:
            data["cancelled"] = True
        _put_edges(data, self.after, self.then)
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes) -> Envelope:
        """The pending job in ``body``, or ``DecodeError`` for any bytes that are not one.

        pailq 0.1.1's entries (``{"payload", "attempts"}``, ``NaN`` included) decode.
        """
        return cls.from_json(jsonsafe.loads(body, "pending job"))

    @classmethod
    def from_json(cls, data: Any) -> Envelope:
        """The pending job in an already decoded JSON value."""
        fields = _Fields(data, "pending job")
        if "payload" not in fields.data:
            raise DecodeError("pending job has no 'payload' field")
        return cls(
            payload=fields.data["payload"],
            attempts=fields.count("attempts"),
            enqueued_at=fields.timestamp("enqueued_at"),
            last_error=fields.error("last_error"),
            redriven=fields.count("redriven"),
            write=fields.text("w", "") or "",
            cancelled=fields.flag("cancelled"),
            tags=read_tags(fields.data.get("tags")),
            trace=read_trace(fields.data.get("trace")),
            after=fields.ids("after"),
            then=fields.ids("then"),
        )


# Lease states. A lease is "running" while its owner works; the owner (or the
# reaper, if the owner dies) moves it to "retrying" or "dying" before it writes
# the next pending entry or the dead letter, so that whoever finishes the
# transition knows which one was decided.
RUNNING = "running"
RETRYING = "retrying"
DYING = "dying"
LEASE_STATES = frozenset({RUNNING, RETRYING, DYING})


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A running job: the body of ``run/{id}``, owned by one worker.

    It carries the payload, so that a job whose worker died can be put back
    in the queue by the reaper: the pending entry was deleted at claim time.
    """

    job_id: str
    payload: Any
    attempt: int
    owner: str
    lease: str
    enqueued_at: str | None = None
    state: str = RUNNING
    error: ErrorInfo | None = None
    progress: Any = None
    reaped: bool = False
    redriven: int = 0
    write: str = field(default_factory=new_token)
    retry_after: float = 0.0
    """Seconds a ``retrying`` lease waits before the reaper requeues it (a retry backoff)."""
    uncounted: bool = False
    """Set on a ``retrying`` lease released before its handler started: the attempt is not spent."""
    raw: str | None = None
    """Foreign bytes this ``dying`` lease quarantines: whoever finishes it keeps them in ``dlq/``."""
    tags: Tags = field(default_factory=dict)
    trace: dict[str, str] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    then: tuple[str, ...] = ()
    """As in ``Envelope``: copied from the entry at claim, and into every record after it."""

    @property
    def attempts_used(self) -> int:
        """The attempts the job has spent once this one ends: the next pending entry's ``attempts``.

        ``attempt``, except for a release before the handler started, which gives the
        attempt back (``uncounted``).
        """
        return max(0, self.attempt - 1) if self.uncounted else self.attempt

    def rewritten(self, **changes: Any) -> Self:
        """A copy with ``changes`` and a fresh write token."""
        return replace(self, write=new_token(), **changes)

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "id": self.job_id,
            "payload": self.payload,
            "attempts": self.attempt,
            "owner": self.owner,
            "lease": self.lease,
            "state": self.state,
        }
        if self.enqueued_at:
            data["enqueued_at"] = self.enqueued_at
        if self.error:
            data["error"] = self.error.to_json()
        if self.progress is not None:
            data["progress"] = self.progress
        if self.reaped:
            data["reaped"] = True
        if self.redriven:
            data["redriven"] = self.redriven
        if self.retry_after:
            data["retry_after"] = self.retry_after
        if self.uncounted:
            data["uncounted"] = True
        if self.raw is not None:
            data["raw"] = self.raw
        if self.tags:
            data["tags"] = self.tags
        if self.trace:
            data["trace"] = self.trace
        _put_edges(data, self.after, self.then)
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes, job_id: str) -> LeaseRecord:
        """The lease in ``body`` (the object ``run/{job_id}``), or ``DecodeError``.

        A pailq 0.1.1 lease is a copy of the pending entry it was claimed from.
        """
        fields = _Fields(jsonsafe.loads(body, "lease"), "lease")
        if "payload" not in fields.data:
            raise DecodeError("lease has no 'payload' field")
        state = fields.text("state", RUNNING)
        if state not in LEASE_STATES:
            raise DecodeError(f"lease has an unknown 'state': {_show(state)}")
        attempts = fields.count("attempts")
        return cls(
            job_id=fields.job_id(job_id),
            payload=fields.data["payload"],
            # pailq 0.1.1 leases count attempts already made before this run.
            attempt=attempts + (0 if "lease" in fields.data else 1),
            owner=fields.text("owner", "pailq") or "pailq",
            lease=fields.text("lease", "") or "",
            enqueued_at=fields.timestamp("enqueued_at"),
            state=state,
            error=fields.error("error"),
            progress=fields.data.get("progress"),
            reaped=fields.flag("reaped"),
            redriven=fields.count("redriven"),
            write=fields.text("w", "") or "",
            retry_after=fields.seconds("retry_after", MAX_RETRY_DELAY),
            uncounted=fields.flag("uncounted"),
            raw=fields.text("raw"),
            tags=read_tags(fields.data.get("tags")),
            trace=read_trace(fields.data.get("trace")),
            after=fields.ids("after"),
            then=fields.ids("then"),
        )

    def envelope(self, *, attempts: int, last_error: ErrorInfo | None) -> Envelope:
        return Envelope(
            payload=self.payload,
            attempts=attempts,
            enqueued_at=self.enqueued_at,
            last_error=last_error,
            redriven=self.redriven,
            tags=self.tags,
            trace=self.trace,
            after=self.after,
            then=self.then,
        )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-lettered job: the body of ``dlq/{id}``."""

    job_id: str
    payload: Any
    attempts: int
    error: ErrorInfo | None
    enqueued_at: str | None = None
    raw: str | None = None
    redriven: int = 0
    write: str = field(default_factory=new_token)
    tags: Tags = field(default_factory=dict)
    trace: dict[str, str] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    then: tuple[str, ...] = ()
    """As in ``Envelope``: a redrive sends them back with the job."""

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "id": self.job_id,
            "payload": self.payload,
            "attempts": self.attempts,
            "error": self.error.to_json() if self.error else None,
        }

        if self.enqueued_at:
            data["enqueued_at"] = self.enqueued_at
        if self.raw is not None:
            data["raw"] = self.raw
        if self.redriven:
            data["redriven"] = self.redriven
        if self.tags:
            data["tags"] = self.tags
        if self.trace:
            data["trace"] = self.trace
        _put_edges(data, self.after, self.then)
        data["w"] = self.write
        return dumps(data)

    @property
    def quarantined(self) -> bool:
        """True for foreign bytes dead-lettered as found (``raw``): there is no job to redrive."""
        return self.raw is not None

    @classmethod
    def decode(cls, body: bytes, job_id: str) -> DeadLetter:
        """The dead letter in ``body`` (the object ``dlq/{job_id}``), or ``DecodeError``."""
        fields = _Fields(jsonsafe.loads(body, "dead letter"), "dead letter")
        return cls(
            job_id=fields.job_id(job_id),
            payload=fields.data.get("payload"),
            attempts=fields.count("attempts"),
            error=fields.error("error"),
            enqueued_at=fields.timestamp("enqueued_at"),
            raw=fields.text("raw"),
            redriven=fields.count("redriven"),
            write=fields.text("w", "") or "",
            tags=read_tags(fields.data.get("tags")),
            trace=read_trace(fields.data.get("trace")),
            after=fields.ids("after"),
            then=fields.ids("then"),
        )

    @classmethod
    def unreadable(cls, job_id: str, body: bytes, error: DecodeError) -> DeadLetter:
        """What ``dead_letters`` shows for a ``dlq/`` object that is not a dead letter: its bytes and why."""
        return cls(job_id, None, 0, ErrorInfo.from_exception(error), raw=raw_text(body))


def _put_edges(data: dict[str, Any], after: tuple[str, ...], then: tuple[str, ...]) -> None:
    """A job's dependencies and dependents, only when it has some: other jobs' bytes are unchanged."""
    if after:
        data["after"] = list(after)
    if then:
        data["then"] = list(then)


def encode_result(result: Any) -> bytes:
    """A handler's return value as stored in ``done/{id}``; None becomes ``{}``.

    ``PayloadError`` (saying where) for a result JSON cannot hold.
    """
    return jsonsafe.check_value({} if result is None else result, "result")


def decode_result(body: bytes) -> Any:
    """The result in a ``done/`` object, or ``DecodeError`` (pailq 0.1.1's ``NaN`` decodes)."""
    return jsonsafe.loads(body, "result")
