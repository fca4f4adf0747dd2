"""Foreign bytes: objects another writer could leave in a pail bucket, by kind.

One catalogue, shared by the reliability suite (tests/reliability), the
decoder fuzz (tests/unit/test_decoder_fuzz.py) and the simulation's hostile
writer (tests/simulation/hostile.py). Each body is something a reader must
survive: pailq 0.1.1's own encoding (bare ``NaN``), JSON of the wrong shape
or types, numbers that overflow, nesting deeper than any interpreter
decodes, empty and non-UTF-8 bodies. Each key shape is one a person or a
console makes: zero-byte "folder" markers, nested keys, malformed delayed
keys.

A hostile body under ``queue/`` must be dead-lettered with its raw bytes;
one under ``run/`` must be reaped past (and quarantined once expired); one
under ``dlq/`` shows as an unreadable letter; none may raise out of a
worker loop, the reaper, ``status``, ``stats``, ``dead_letters`` or
``redrive``.
"""

from __future__ import annotations

from dataclasses import dataclass


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@dataclass(frozen=True, slots=True)
class Hostile:
    """One hostile body, named for the test ids and the reports."""

    name: str
    body: bytes


PAILQ_NAN = b'{"payload": {"x": NaN}, "attempts": 0}'
"""What pailq 0.1.1 writes for ``enqueue({"x": float("nan")})``: Python's json default."""

PAILQ_INFINITY = b'{"payload": {"x": Infinity, "y": -Infinity}, "attempts": 1}'

# The bodies the hostile review found (issue 12, defect 1), then every other kind.
REVIEW_BODIES: tuple[Hostile, ...] = (
    Hostile("pailq-nan-payload", PAILQ_NAN),
    Hostile("bare-infinity", b"Infinity"),
    Hostile("redriven-string", b'{"payload": 1, "attempts": 0, "redriven": "x"}'),
    Hostile(
        "last-error-attempt-string",
        b'{"payload": 1, "attempts": 1, "last_error": {"type": "E", "message": "m", "attempt": "two"}}',
    ),
    Hostile("redriven-overflow", b'{"payload": 1, "attempts": 0, "redriven": 1e999}'),
    Hostile("nesting-50000", b'{"payload": ' + _deep(50_000) + b', "attempts": 0}'),
    Hostile("payload-5000-deep", b'{"payload": ' + _deep(5_000) + b', "attempts": 0}'),
)

OTHER_BODIES: tuple[Hostile, ...] = (
    Hostile("pailq-infinity-payload", PAILQ_INFINITY),
    Hostile("zero-bytes", b""),
    Hostile("whitespace", b" \n\t "),
    Hostile("not-utf8", b"\xff\xfe\x00\x80garbage"),
    Hostile("not-json", b"\x00not json{"),
    Hostile("truncated", b'{"payload": {"a": 1'),
    Hostile("json-null", b"null"),
    Hostile("json-array", b"[1, 2, 3]"),
    Hostile("json-string", b'"queue"'),
    Hostile("no-payload", b'{"attempts": 0}'),
    Hostile("attempts-string", b'{"payload": 1, "attempts": "x"}'),
    Hostile("attempts-bool", b'{"payload": 1, "attempts": true}'),
    Hostile("attempts-negative", b'{"payload": 1, "attempts": -3}'),
    Hostile("attempts-float", b'{"payload": 1, "attempts": 1.5}'),
    Hostile("attempts-1e300", b'{"payload": 1, "attempts": 1e300}'),
    Hostile("attempts-huge-int", b'{"payload": 1, "attempts": 1' + b"0" * 400 + b"}"),
    Hostile("int-over-4300-digits", b'{"payload": 1' + b"0" * 5000 + b', "attempts": 0}'),
    Hostile("cancelled-string", b'{"payload": 1, "attempts": 0, "cancelled": "false"}'),
    Hostile("enqueued-at-number", b'{"payload": 1, "attempts": 0, "enqueued_at": 5}'),
    Hostile("enqueued-at-garbage", b'{"payload": 1, "attempts": 0, "enqueued_at": "yesterday"}'),
    Hostile("last-error-string", b'{"payload": 1, "attempts": 1, "last_error": "boom"}'),
    Hostile("write-token-number", b'{"payload": 1, "attempts": 0, "w": 5}'),
    Hostile("top-level-nan", b"NaN"),
)

QUEUE_BODIES: tuple[Hostile, ...] = REVIEW_BODIES + OTHER_BODIES
"""Every hostile pending-entry body."""

LEASE_BODIES: tuple[Hostile, ...] = (
    Hostile("pailq-nan-lease", PAILQ_NAN),
    Hostile("attempts-string", b'{"payload": 1, "attempts": "x"}'),
    Hostile("zero-bytes", b""),
    Hostile("nesting-50000", b'{"payload": ' + _deep(50_000) + b', "attempts": 0}'),
    Hostile("state-unknown", b'{"payload": 1, "attempts": 1, "lease": "t", "state": "paused"}'),
    Hostile(
        "retry-after-infinite",
        b'{"payload": 1, "attempts": 1, "lease": "t", "state": "retrying", "retry_after": 1e999}',
    ),
    Hostile("progress-nan", b'{"payload": 1, "attempts": 1, "lease": "t", "progress": NaN}'),
    Hostile("wrong-id", b'{"payload": 1, "attempts": 1, "lease": "t", "id": "SOMEONE-ELSE"}'),
)
"""Hostile ``run/`` bodies, pailq 0.1.1's NaN lease included (its leases copy the entry)."""

LETTER_BODIES: tuple[Hostile, ...] = (
    Hostile("zero-bytes", b""),
    Hostile("not-json", b"<Error>console upload</Error>"),
    Hostile("attempts-string", b'{"payload": 1, "attempts": "x"}'),
    Hostile("error-not-object", b'{"payload": 1, "attempts": 1, "error": 7}'),
)

RESULT_BODIES: tuple[Hostile, ...] = (
    Hostile("zero-bytes", b""),
    Hostile("not-json", b"\xff\xfe"),
    Hostile("nesting-50000", _deep(50_000)),
)

DEDUP_BODIES: tuple[Hostile, ...] = (
    Hostile("zero-bytes", b""),
    Hostile("no-id", b'{"key": "k", "envelope": {"payload": 1}}'),
    Hostile("envelope-nan", b'{"id": "01J0000000000000000000000A", "envelope": {"payload": NaN}}'),
    Hostile(
        "due-garbage", b'{"id": "01J0000000000000000000000A", "envelope": {"payload": 1}, "due": 5}'
    ),
)

ALL_BODIES: tuple[bytes, ...] = tuple(
    dict.fromkeys(
        h.body
        for group in (QUEUE_BODIES, LEASE_BODIES, LETTER_BODIES, RESULT_BODIES, DEDUP_BODIES)
        for h in group
    )
)
"""Every distinct hostile body above: the fuzz's explicit examples."""


def hostile_id(number: int) -> str:
    """A 26-character job id that sorts before every real ULID (they start with ``0[1-7]``)."""
    return f"00000000000000000000{number:06d}"
