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

import json
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

from pail.errors import DecodeError, PayloadError
from pail.ids import new_token

FORMAT_VERSION = 1
TRACEBACK_LIMIT = 4000
MESSAGE_LIMIT = 2000

# Object metadata (x-amz-meta-*) pail sets; S3 lower-cases the names.
META_WRITE = "pail-write"
META_OUTCOME = "pail-outcome"
META_ATTEMPT = "pail-attempt"
META_LIFE = "pail-life"
"""On ``done/{id}``: the life of the job the outcome ends (its ``redriven`` count; 0 if absent)."""
OUTCOME_SUCCEEDED = "succeeded"
OUTCOME_DEAD = "dead"
OUTCOME_CANCELLED = "cancelled"

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


def dumps(value: Any) -> bytes:
    """Compact JSON, or ``PayloadError`` naming what could not be encoded."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"not JSON-serialisable: {exc}") from exc


def _loads(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError(f"{what} is not JSON: {exc}") from exc


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
        frames = "".join(traceback.format_tb(exc.__traceback__))
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
    def from_json(cls, data: Any) -> ErrorInfo | None:
        if not isinstance(data, dict):
            return None
        return cls(
            str(data.get("type", "Error")),
            str(data.get("message", "")),
            str(data.get("traceback", "")),
            int(data.get("attempt", 0) or 0),
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

    def encode(self) -> bytes:
        data: dict[str, Any] = {"payload": self.payload, "attempts": self.attempts}
        data["v"] = FORMAT_VERSION
        if self.enqueued_at:
            data["enqueued_at"] = self.enqueued_at
        if self.last_error:
            data["last_error"] = self.last_error.to_json()
        if self.redriven:
            data["redriven"] = self.redriven
        if self.cancelled:
            data["cancelled"] = True
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes) -> Envelope:
        data = _loads(body, "pending job")
        if not isinstance(data, dict) or "payload" not in data:
            raise DecodeError("pending job has no 'payload' field")
        attempts = data.get("attempts", 0)
        if not isinstance(attempts, int) or attempts < 0:
            raise DecodeError(f"pending job has an invalid 'attempts': {attempts!r}")
        return cls(
            payload=data["payload"],
            attempts=attempts,
            enqueued_at=data.get("enqueued_at"),
            last_error=ErrorInfo.from_json(data.get("last_error")),
            redriven=int(data.get("redriven", 0) or 0),
            write=str(data.get("w", "")),
            cancelled=bool(data.get("cancelled", False)),
        )


# Lease states. A lease is "running" while its owner works; the owner (or the
# reaper, if the owner dies) moves it to "retrying" or "dying" before it writes
# the next pending entry or the dead letter, so that whoever finishes the
# transition knows which one was decided.
RUNNING = "running"
RETRYING = "retrying"
DYING = "dying"


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
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes, job_id: str) -> LeaseRecord:
        data = _loads(body, "lease")
        if not isinstance(data, dict) or "payload" not in data:
            raise DecodeError("lease has no 'payload' field")
        return cls(
            job_id=str(data.get("id", job_id)),
            payload=data["payload"],
            # pailq 0.1.1 leases count attempts already made before this run.
            attempt=int(data.get("attempts", 0) or 0) + (0 if "lease" in data else 1),
            owner=str(data.get("owner", "pailq")),
            lease=str(data.get("lease", "")),
            enqueued_at=data.get("enqueued_at"),
            state=str(data.get("state", RUNNING)),
            error=ErrorInfo.from_json(data.get("error")),
            progress=data.get("progress"),
            reaped=bool(data.get("reaped", False)),
            redriven=int(data.get("redriven", 0) or 0),
            write=str(data.get("w", "")),
            retry_after=float(data.get("retry_after", 0) or 0),
            uncounted=data.get("uncounted") is True,
        )

    def envelope(self, *, attempts: int, last_error: ErrorInfo | None) -> Envelope:
        return Envelope(
            payload=self.payload,
            attempts=attempts,
            enqueued_at=self.enqueued_at,
            last_error=last_error,
            redriven=self.redriven,
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
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes, job_id: str) -> DeadLetter:
        data = _loads(body, "dead letter")
        if not isinstance(data, dict):
            raise DecodeError("dead letter is not an object")
        return cls(
            job_id=str(data.get("id", job_id)),
            payload=data.get("payload"),
            attempts=int(data.get("attempts", 0) or 0),
            error=ErrorInfo.from_json(data.get("error")),
            enqueued_at=data.get("enqueued_at"),
            raw=data.get("raw"),
            redriven=int(data.get("redriven", 0) or 0),
            write=str(data.get("w", "")),
        )


def encode_result(result: Any) -> bytes:
    """A handler's return value as stored in ``done/{id}``; None becomes ``{}``."""
    return dumps({} if result is None else result)


def decode_result(body: bytes) -> Any:
    return _loads(body, "result")
