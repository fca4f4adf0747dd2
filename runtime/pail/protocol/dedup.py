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

**A keyed job that waits** (``enqueue(key=K, after=[...])``): the record
carries the waiting record's fields (the envelope with ``after`` and
``then``, under ``"waiting"`` instead of ``"envelope"``, and
``on_failure``), and step 2 is ``graph.put_waiting`` (create-only
``wait/{id}``, then its one look at the dependencies) instead of the entry.
A repeat looks for the job from ``wait/`` on (``job_exists``: a job moves
``wait/`` -> ``queue/`` -> ``run/`` -> ``done/``, each written before the last
is removed) and repairs with the waiting record, never an entry: an entry
would run the job before its dependencies. A reader older than this field
finds no ``"envelope"`` and refuses the record (``DecodeError``) rather
than writing that entry.

A key is remembered for as long as its record exists: ``Pail.forget_key``
deletes it, and a lifecycle rule on the ``keys/`` prefix can expire records
(keep it shorter than the result TTL: a key that outlives its job's
``done/`` object would let the repair run that job again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
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
from pail.protocol.dependencies.graph import check_edges, put_waiting
from pail.protocol.dependencies.record import DEAD_LETTER, check_on_failure
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


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A decoded key record: the job it names and what a repair writes for it.

    ``envelope`` is the job's first entry (stripped to the producer's
    fields); with ``envelope.after`` the job waits (``on_failure`` as in
    ``WaitingJob``) and its first record is ``wait/{id}``, not an entry.
    """

    job_id: str
    envelope: Envelope
    due: datetime | None = None
    on_failure: str = DEAD_LETTER

    @property
    def waits(self) -> bool:
        """True for a job enqueued ``after`` others: its first record is ``wait/{id}``."""
        return bool(self.envelope.after)


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
    after: Sequence[str] | None = None,
    then: Sequence[str] = (),
    on_failure: str = DEAD_LETTER,
    job_id: str | None = None,
) -> EnqueueResult:
    """Enqueue ``payload`` unless a job with ``key`` exists; see the module docstring.

    ``now`` is the producer's wall clock (the job's ``enqueued_at``). With
    ``due``, the entry is a delayed one (``pail.protocol.delay``); with
    ``group``, the new job's id names it (``pail.protocol.limits.groups``).
    With ``after``, the job waits for those jobs (``then`` and ``on_failure``
    as in ``graph.put_waiting``); it goes with no ``due``. ``job_id`` is the
    id the job gets if this call creates it (default: a new one).
    """
    record_key = keys.dedup(digest(key))
    jsonsafe.check_value(payload, "payload")
    if job_id is None:
        job_id = new_job_id() if group is None else grouped_id(new_job_id(), group)
    edges: tuple[str, ...] = ()
    if after is not None:
        if due is not None:
            raise ConfigurationError("a keyed job with after= goes with no due time")
        edges = check_edges(job_id, after)
        check_on_failure(on_failure)
    elif then:
        raise ConfigurationError("then= of a keyed job goes with after=")
    envelope = Envelope(
        payload=payload,
        enqueued_at=now.isoformat(),
        tags=tags or {},
        trace=trace or {},
        after=edges,
        then=tuple(then),
    )
    made = KeyRecord(job_id, envelope, due, on_failure)
    token = new_token()
    record = dumps({**_fields(made, key), "w": token})
    for _ in range(ROUNDS):
        won = put_conditional(
            store, record_key, record, token, if_none_match=True, stats=stats, reason="dedup"
        )
        if won is not None:
            _write_first(store, keys, made, now, stats)
            return EnqueueResult(job_id, created=True)
        existing = store.get(record_key)
        if existing is None:
            continue  # forgotten since our write failed: try again
        found = decode_record(existing.body)
        if _unknown(store, keys, found):
            # Its producer crashed before step 2 (or is just about to do it):
            # write the job's first record; create-only, so at most one of us lands first.
            _repair(store, keys, found, now, stats)
        return EnqueueResult(found.job_id, created=False)
    raise ConfigurationError(f"dedup key {key!r} keeps disappearing; is something deleting keys/?")


def forget_key(store: Store, keys: Keys, key: str) -> None:
    """Forget ``key``: the next enqueue with it creates a new job."""
    store.delete(keys.dedup(digest(key)))


_EXISTS_ROUNDS = 3
"""A job moves queue -> run -> done by writing the next key first: a couple of rounds see it."""


def job_exists(store: Store, keys: Keys, job_id: str, *, waiting: bool = False) -> bool:
    """Whether any object of the job exists; one HEAD while it is pending (cheaper than status).

    With ``waiting`` (a job enqueued ``after`` others) ``wait/{id}`` is looked
    at first: the job moves ``wait/`` -> ``queue/`` -> ``run/`` -> ``done/``,
    each written before the last is removed, so HEADs in that order cannot
    miss a job that moves between them (and a requeue, ``run/`` -> ``queue/``,
    is what the rounds are for). A job without ``after`` never waits: its
    repeat pays no HEAD of ``wait/``.
    """
    for layout in keys.layouts(job_id):  # each shard it may live in, in a sharded queue
        places: tuple[str, ...] = (
            layout.queue(job_id),
            layout.run(job_id),
            layout.done(job_id),
            layout.dlq(job_id),
        )
        if waiting:
            places = (layout.wait(job_id), *places)
        for _ in range(_EXISTS_ROUNDS):
            for key in places:
                if store.head(key) is not None:
                    return True
    return False


def _unknown(store: Store, keys: Keys, record: KeyRecord) -> bool:
    if job_exists(store, keys, record.job_id, waiting=record.waits):
        return False
    due = record.due
    return due is None or store.head(delay.delayed_key(keys, due, record.job_id)) is None


def _repair(
    store: Store, keys: Keys, record: KeyRecord, now: datetime, stats: WriteStats | None
) -> None:
    """A repeat's repair of a producer that crashed before step 2: the job's first record.

    For a job that waits, that is its waiting record, never an entry: an
    entry would run it before its dependencies (the known-bad variant the
    simulation catches, ``keyed-repair-writes-an-entry``).
    """
    _write_first(store, keys, record, now, stats)


def _write_first(
    store: Store, keys: Keys, record: KeyRecord, now: datetime, stats: WriteStats | None
) -> None:
    """The job's first record: its waiting record if it waits, else its entry (step 2)."""
    if not record.waits:
        _write_entry(store, keys, record.job_id, record.envelope, record.due, stats)
        return
    envelope = record.envelope
    # The first producer's enqueued_at, not the repairer's clock: the job is the same job.
    enqueued = datetime.fromisoformat(envelope.enqueued_at) if envelope.enqueued_at else now
    put_waiting(
        store,
        keys,
        envelope.payload,
        record.job_id,
        envelope.after,
        now=enqueued,
        then=envelope.then,
        on_failure=record.on_failure,
        tags=envelope.tags,
        trace=envelope.trace,
        stats=stats,
        late=True,  # its dependencies may exist already and name no dependent
    )


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


def _fields(record: KeyRecord, key: str) -> dict[str, Any]:
    """The key record's JSON fields (all but its write token)."""
    # A waiting job's envelope goes under "waiting": a reader older than it
    # finds no "envelope" and refuses the record instead of writing an entry.
    place = "waiting" if record.waits else "envelope"
    fields: dict[str, Any] = {
        "id": record.job_id,
        "key": key,
        place: json.loads(record.envelope.encode()),
    }
    if record.due is not None:
        fields["due"] = record.due.isoformat()
    if record.waits:
        fields["on_failure"] = record.on_failure
    return fields


def decode_record(body: bytes) -> KeyRecord:
    """A key record's job and first record, or ``DecodeError`` for any other bytes."""
    try:
        data = jsonsafe.loads(body, "dedup key record")
        if not isinstance(data, dict):
            raise DecodeError("it is not a JSON object")
        job_id = validate_job_id(data.get("id"))  # type: ignore[arg-type]
        if ("envelope" in data) == ("waiting" in data):
            raise DecodeError("it needs exactly one of 'envelope' and 'waiting'")
        waits = "waiting" in data
        envelope = Envelope.from_json(data["waiting" if waits else "envelope"])
        jsonsafe.check_value(envelope.payload, "payload")
        due_text = data.get("due")
        due = validate_due(datetime.fromisoformat(due_text), "due") if due_text else None
        on_failure = data.get("on_failure", DEAD_LETTER)
        if waits:
            if due is not None:
                raise DecodeError("a waiting job has no due time")
            check_edges(job_id, envelope.after)  # non-empty, bounded, not itself
            check_on_failure(on_failure)
            if envelope.enqueued_at:
                datetime.fromisoformat(envelope.enqueued_at)  # the repair reads it back
        elif envelope.after or envelope.then or "on_failure" in data:
            raise DecodeError("only a waiting job's record has 'after', 'then' or 'on_failure'")
    except (DecodeError, ConfigurationError, PayloadError, ValueError, TypeError) as exc:
        raise DecodeError(f"dedup key record is unreadable: {exc}") from None
    kept = Envelope(
        payload=envelope.payload,
        enqueued_at=envelope.enqueued_at,
        tags=envelope.tags,
        trace=envelope.trace,
        after=envelope.after,
        then=envelope.then,
    )
    return KeyRecord(job_id, kept, due, on_failure)
