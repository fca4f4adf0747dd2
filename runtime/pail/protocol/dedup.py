"""Dedup keys: at most one job per key, by a create-only write of ``keys/{sha256(key)}``.

The key record holds the job id and the payload, and is written *before* the
job's pending entry:

1. PUT ``keys/{digest}`` ``If-None-Match: *``: ``{"id", "payload", ...}``. It
   decides which job the key names. A loser reads the record and returns
   that id with ``created=False``.
2. PUT ``queue/{id}`` ``If-None-Match: *``.

A crash between the two leaves a record naming a job with no object. The
next ``enqueue`` with the same key notices (the job has no status) and
writes the entry from the record, create-only, so the job is not lost and
the key is not blocked. That repair and a late step 2 of the first producer
can both land, at different times; every claim checks ``done/{id}`` (its
step 4), so a late entry never runs a finished job again.

A key is remembered for as long as its record exists: ``Pail.forget_key``
deletes it, and a lifecycle rule on the ``keys/`` prefix can expire records
(keep it shorter than the result TTL: a key that outlives its job's
``done/`` object would let the repair run that job again).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pail import jsonsafe
from pail.bounds import validate_due
from pail.codec import Envelope, dumps
from pail.errors import ConfigurationError, DecodeError, PayloadError
from pail.ids import new_job_id, new_token, validate_job_id
from pail.keys import Keys
from pail.protocol import delay, index
from pail.protocol.limits.groups import grouped_id
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store
from pail.tags import Tags

MAX_KEY_LENGTH = 1024
ROUNDS = 3


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What a keyed enqueue did: the job's id, and whether this call created the job.

    ``created`` is False when the key was already used: ``id`` is then the
    existing job's id, and ``payload`` was not enqueued.
    """

    id: str
    created: bool


def digest(key: str) -> str:
    """The object name of a dedup key: its SHA-256, so any string is a safe key.

    >>> digest("order-42")[:16]
    '3bf8b157c4238eef'
    """
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise ConfigurationError(f"a dedup key is a string of 1-{MAX_KEY_LENGTH} characters")
    try:
        encoded = key.encode()
    except UnicodeEncodeError as exc:
        # A lone surrogate: what invalid UTF-8 in a shell argument becomes in Python.
        raise ConfigurationError(
            f"dedup key {key!r} is not valid UTF-8 text (at character {exc.start})"
        ) from None
    return hashlib.sha256(encoded).hexdigest()


def enqueue_keyed(
    store: Store,
    keys: Keys,
    payload: Any,
    key: str,
    *,
    now: datetime,
    due: datetime | None = None,
    stats: WriteStats | None = None,
    tags: Tags | None = None,
    trace: dict[str, str] | None = None,
    group: str | None = None,
) -> EnqueueResult:
    """Enqueue ``payload`` unless a job with ``key`` exists; see the module docstring.

    ``now`` is the producer's wall clock (the job's ``enqueued_at``). With
    ``due``, the entry is a delayed one (``pail.protocol.delay``); with
    ``group``, the new job's id names it (``pail.protocol.limits.groups``).
    """
    record_key = keys.dedup(digest(key))
    jsonsafe.check_value(payload, "payload")
    job_id = new_job_id() if group is None else grouped_id(new_job_id(), group)
    envelope = Envelope(
        payload=payload, enqueued_at=now.isoformat(), tags=tags or {}, trace=trace or {}
    )
    token = new_token()
    fields: dict[str, Any] = {"id": job_id, "key": key, "envelope": json.loads(envelope.encode())}
    if due is not None:
        fields["due"] = due.isoformat()
    record = dumps({**fields, "w": token})
    for _ in range(ROUNDS):
        won = put_conditional(
            store, record_key, record, token, if_none_match=True, stats=stats, reason="dedup"
        )
        if won is not None:
            _write_entry(store, keys, job_id, envelope, due, stats)
            return EnqueueResult(job_id, created=True)
        existing = store.get(record_key)
        if existing is None:
            continue  # forgotten since our write failed: try again
        existing_id, existing_envelope, existing_due = _decode(existing.body)
        if _unknown(store, keys, existing_id, existing_due):
            # Its producer crashed before step 2 (or is just about to do it):
            # write the entry; create-only, so at most one of us lands first.
            _write_entry(store, keys, existing_id, existing_envelope, existing_due, stats)
        return EnqueueResult(existing_id, created=False)
    raise ConfigurationError(f"dedup key {key!r} keeps disappearing; is something deleting keys/?")


def forget_key(store: Store, keys: Keys, key: str) -> None:
    """Forget ``key``: the next enqueue with it creates a new job."""
    store.delete(keys.dedup(digest(key)))


_EXISTS_ROUNDS = 3
"""A job moves queue -> run -> done by writing the next key first: a couple of rounds see it."""


def job_exists(store: Store, keys: Keys, job_id: str) -> bool:
    """Whether any object of the job exists; one HEAD while it is pending (cheaper than status)."""
    for layout in keys.layouts(job_id):  # each shard it may live in, in a sharded queue
        for _ in range(_EXISTS_ROUNDS):
            for key in (
                layout.queue(job_id),
                layout.run(job_id),
                layout.done(job_id),
                layout.dlq(job_id),
            ):
                if store.head(key) is not None:
                    return True
    return False


def _unknown(store: Store, keys: Keys, job_id: str, due: datetime | None) -> bool:
    if job_exists(store, keys, job_id):
        return False
    return due is None or store.head(delay.delayed_key(keys, due, job_id)) is None


def _write_entry(
    store: Store,
    keys: Keys,
    job_id: str,
    envelope: Envelope,
    due: datetime | None,
    stats: WriteStats | None,
) -> None:
    body = envelope.encode()
    index.write(store, keys, job_id, envelope.tags)  # before the entry: see pail.protocol.index
    target = keys.queue(job_id) if due is None else delay.delayed_key(keys, due, job_id)
    # A 412 is the other writer of this same entry (first producer or repair):
    # the job is pending, which is all this step must ensure.
    put_conditional(
        store,
        target,
        body,
        envelope.write,
        if_none_match=True,
        stats=stats,
        reason="enqueue",
    )


def _decode(body: bytes) -> tuple[str, Envelope, datetime | None]:
    """A key record's job id, envelope and due time, or ``DecodeError`` for any other bytes."""
    try:
        data = jsonsafe.loads(body, "dedup key record")
        if not isinstance(data, dict):
            raise DecodeError("it is not a JSON object")
        job_id = validate_job_id(data.get("id"))  # type: ignore[arg-type]
        envelope = Envelope.from_json(data.get("envelope"))
        jsonsafe.check_value(envelope.payload, "payload")
        due_text = data.get("due")
        due = validate_due(datetime.fromisoformat(due_text), "due") if due_text else None
    except (DecodeError, ConfigurationError, PayloadError, ValueError, TypeError) as exc:
        raise DecodeError(f"dedup key record is unreadable: {exc}") from None
    kept = Envelope(
        payload=envelope.payload,
        enqueued_at=envelope.enqueued_at,
        tags=envelope.tags,
        trace=envelope.trace,
    )
    return job_id, kept, due
