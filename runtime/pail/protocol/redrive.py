"""Taking a dead-lettered job back to the queue, and clearing its old death wherever it is met.

A job lives one **life** per redrive: its ``redriven`` count, carried by
every entry, lease and dead-letter record of the life, and by every outcome
under ``done/`` (metadata ``pail-life``). A redrive takes back the death of
life ``n`` by writing the first entry of life ``n + 1`` (the commit point),
then deleting the ``dlq/`` record and the dead marker of life ``n``.

S3 has no transaction across keys, so a redrive can stop after any of its
writes; and a writer that stalled in the middle of the old death (a
dead-letter whose lease the reaper took over, a create-only PUT that botocore
resends late) can still land a piece of it after the redrive. Both leave the
same thing: a dead marker or a record of an earlier life beside a job that
lives on. The rule is one: **a dead marker or a dead-letter record of an
earlier life than the job's current one is not the job's state**, and
whoever on the life's path meets one removes it (``finish``: each delete is
``If-Match`` on the ETag just read, so nothing else can be removed, and
every write is unique, markers included, so an ETag names one write). The
paths that call it: the redrive itself, a claim (its step 4), an outcome
writer (``outcome.create``), the reaper, and the dead-letter's own check.
``docs/protocol.md`` ("Redrive") has the crash analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

from pail.codec import (
    META_OUTCOME,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    DeadLetter,
    Envelope,
    LeaseRecord,
    life_of,
)
from pail.errors import DecodeError
from pail.keys import Keys
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ObjectInfo, Store, StoredObject


@dataclass(frozen=True, slots=True)
class Redriven:
    """What ``redrive`` did: ``done`` if this call took the job back; ``reason`` otherwise."""

    done: bool
    reason: str = ""


def redrive(
    store: Store, keys: Keys, job_id: str, letter_object: StoredObject, *, stats: WriteStats | None
) -> Redriven:
    """Send the dead letter ``letter_object`` of ``job_id`` back to the queue with fresh attempts.

    Steps: HEAD ``run/{id}`` (a lease means the dead-letter is still being
    written: not yet), HEAD ``done/{id}``, PUT ``queue/{id}`` create-only
    (the next life's first entry: the commit point), DELETE the record, DELETE
    the marker. Raises ``DecodeError`` for a record that is not a dead letter.
    """
    letter = DeadLetter.decode(letter_object.body, job_id)
    if store.head(keys.run(job_id)) is not None:
        # Its dead-letter (or a later life's attempt) is under way: not yet.
        return Redriven(False, "a lease on it still exists; try again once it is gone")
    marker = store.head(keys.done(job_id))
    # No metadata on done/: a result pailq 0.1.1 wrote, a success.
    outcome = None if marker is None else marker.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
    if marker is not None and life_of(marker.metadata) > letter.redriven:
        # A record of an earlier life, left by a late write: the job lives on.
        delete_if_unchanged(store, letter_object.key, letter_object.etag)
        return Redriven(False, "a leftover record of a death already redriven")
    if outcome is not None and outcome != OUTCOME_DEAD:
        return Redriven(False, f"the job ended otherwise ({outcome})")
    life = letter.redriven + 1
    envelope = Envelope(
        payload=letter.payload,
        attempts=0,
        enqueued_at=letter.enqueued_at,
        redriven=life,
        tags=letter.tags,
        trace=letter.trace,
        after=letter.after,
        then=letter.then,
    )
    written = put_conditional(
        store,
        keys.queue(job_id),
        envelope.encode(),
        envelope.write,
        if_none_match=True,
        stats=stats,
        reason="redrive",
    )
    if written is None:
        # Pending already: if it is this life's entry (another redrive's, which
        # may have stopped half-way), finish it; a stale entry a claim drops.
        current = store.get(keys.queue(job_id))
        if current is not None and _life(current.body) >= life:
            finish(store, keys, job_id, life)
        return Redriven(False, "pending already")
    finish(store, keys, job_id, life, letter=letter_object, marker=marker)
    return Redriven(True)


def finish(
    store: Store,
    keys: Keys,
    job_id: str,
    life: int,
    *,
    letter: StoredObject | None = None,
    marker: ObjectInfo | None = None,
) -> None:
    """Remove the dead-letter record, then the dead marker, of any life before ``life``.

    ``letter`` and ``marker`` are the objects as the caller last read them
    (read here when not given). Each delete is ``If-Match`` on what was read:
    a record or marker that changed meanwhile (a later death, a cancellation)
    stays. The record goes first, so a current record never outlives its marker.
    """
    key = keys.dlq(job_id)
    letter = letter if letter is not None else store.get(key)
    gone = (
        letter is None or _dead_life(letter) >= life or delete_if_unchanged(store, key, letter.etag)
    )
    if not gone:
        again = store.get(key)  # another write since: a late copy of the old record?
        if again is not None and _dead_life(again) < life:
            delete_if_unchanged(store, key, again.etag)
    marker = marker if marker is not None else store.head(keys.done(job_id))
    if marker is not None and stale_marker(marker, life):
        delete_if_unchanged(store, keys.done(job_id), marker.etag)
        clear_late_record(store, keys, job_id, life)


def clear_late_record(store: Store, keys: Keys, job_id: str, life: int) -> None:
    """Remove a dead-letter record of a life before ``life`` written since ``finish`` deleted it.

    A dead-letter writer that stalled (its lease taken over, its death
    finished by the reaper) can land its record late, between ``finish``'s
    two deletes. With the marker gone, no later reader meets a stale marker,
    so none would know the record is a piece of a past life: ``finish`` looks
    once more after deleting the marker (one GET, on the redrive path only).
    """
    key = keys.dlq(job_id)
    late = store.get(key)
    if late is not None and _dead_life(late) < life:
        delete_if_unchanged(store, key, late.etag)


def leftover_letter(store: Store, keys: Keys, letter: DeadLetter, etag: str) -> bool:
    """True if ``letter``, a ``dlq/`` record just read (ETag ``etag``), is a piece of a past life; then it is removed.

    pail writes a death's marker before its record, and a redrive removes the
    record before the marker, so a record pail wrote (it carries a write
    token) stands only beside the dead marker of its own life or a later
    death's. One written by a dead-letter writer that stalled past a whole
    redrive, landed after ``clear_late_record``'s last look and crashed
    before its own check, stands beside nothing of its life: a reader that
    lists dead letters meets it and removes it here (one HEAD, then a DELETE
    ``If-Match`` the ETag read). pailq 0.1.1's records carry no token and
    have no marker: they are always current. ``keys`` is pinned to the
    record's shard.
    """
    if not letter.write:
        return False
    done = store.head(keys.done(letter.job_id))
    own = done is not None and done.metadata.get(META_OUTCOME) == OUTCOME_DEAD
    if own and done is not None and life_of(done.metadata) <= letter.redriven:
        return False  # beside its own life's dead marker: the job's state
    delete_if_unchanged(store, keys.dlq(letter.job_id), etag)
    return True


def stale_marker(done: ObjectInfo, life: int) -> bool:
    """True if ``done`` is the dead marker of a life before ``life``: not the job's outcome."""
    return done.metadata.get(META_OUTCOME) == OUTCOME_DEAD and life_of(done.metadata) < life


def took_back(store: Store, keys: Keys, job_id: str, life: int, done: ObjectInfo | None) -> bool:
    """True if ``done`` is a dead marker of a life before ``life``; then it is cleared (``finish``).

    Every reader of ``done/{id}`` on the path of life ``life`` calls this
    before taking ``done`` for the job's outcome.
    """
    if done is None or not stale_marker(done, life):
        return False
    finish(store, keys, job_id, life, marker=done)
    return True


def later_life(store: Store, keys: Keys, job_id: str, life: int) -> bool:
    """True if the job lives on past ``life``: a redrive took that death back.

    Reads the pending entry, the lease and then ``done/`` (in the order a job
    moves through them, so a life that moves on meanwhile is still seen).
    """
    entry = store.get(keys.queue(job_id))
    if entry is not None and _life(entry.body) > life:
        return True
    lease = store.get(keys.run(job_id))
    if lease is not None and _lease_life(lease.body, job_id) > life:
        return True
    done = store.head(keys.done(job_id))
    if done is None:
        return True  # the death of ``life`` is gone: taken back
    return life_of(done.metadata) > life or done.metadata.get(META_OUTCOME) != OUTCOME_DEAD


def _life(body: bytes) -> int:
    try:
        return Envelope.decode(body).redriven
    except DecodeError:
        return 0


def _lease_life(body: bytes, job_id: str) -> int:
    try:
        return LeaseRecord.decode(body, job_id).redriven
    except DecodeError:
        return 0


def _dead_life(letter: StoredObject) -> int:
    """The life a dead-letter record belongs to; an unreadable one is no one's to remove."""
    try:
        return DeadLetter.decode(letter.body, letter.key.rpartition("/")[2]).redriven
    except DecodeError:
        return 1 << 30
