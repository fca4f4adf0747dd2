"""The second half of every transition out of ``run/{id}``.

An owner decides (retry or dead-letter) by rewriting its lease under
``If-Match``, which is the commit point. The writes after it are the same
whether the owner does them or, after the owner died, the reaper does: so
they live here, once, and both call them.

Each function is idempotent: run twice, or after a crash half-way, it ends
in the same state.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from pail.codec import (
    META_OUTCOME,
    OUTCOME_DEAD,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    marker_body,
)
from pail.errors import ConditionFailedError, DecodeError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol import dependencies, outcome, redrive
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store

REQUEUE_TRIES = 3


class Ending(StrEnum):
    """How a transition out of ``run/{id}`` ended."""

    REQUEUED = "requeued"
    DEAD_LETTERED = "dead_lettered"
    ALREADY_DONE = "already_done"
    LEASE_LOST = "lease_lost"
    """The writes were made, but the lease was taken over before it was dropped: the
    reaper (after a stall) finished the transition too, and the job may have moved on."""


def requeue(
    store: Store,
    keys: Keys,
    record: LeaseRecord,
    lease_etag: str,
    *,
    attempts: int,
    error: ErrorInfo | None,
    stats: WriteStats | None = None,
) -> Ending:
    """Write the next pending entry for the job, then drop the lease.

    If a pending entry already exists with at least as many attempts (or of
    a later life), it is kept: it was written by an earlier try of this same
    transition (or by a redrive), and the job is pending, which is what this
    step must ensure. One with fewer attempts is stale (a stalled worker's late retry, or a producer's PUT
    that botocore retried after a worker had claimed the job) and is
    replaced under ``If-Match``: kept, it would run attempts over again,
    past ``max_retries``. The lease is dropped only once the job is surely
    pending; otherwise it stays, deciding a retry, for the reaper to finish.
    """
    envelope = record.envelope(attempts=attempts, last_error=error)
    pending = _ensure_pending(store, keys.queue(record.job_id), envelope, stats)
    if pending and not _drop_lease(store, keys.run(record.job_id), lease_etag):
        return Ending.LEASE_LOST
    return Ending.REQUEUED


def _drop_lease(store: Store, key: str, etag: str) -> bool:
    """Delete the lease ``If-Match`` its ETag; False if it was not ours any more.

    A 412 means the lease was rewritten (the reaper's fence). A 404 on a
    delete sent once means someone else removed it; on a resent one it may be
    our own first try, which counts as ours.
    """
    try:
        store.delete(key, if_match=etag)
    except ConditionFailedError as exc:
        return exc.missing and exc.retried
    return True


def _ensure_pending(store: Store, key: str, envelope: Envelope, stats: WriteStats | None) -> bool:
    """Make ``key`` a pending entry with at least ``envelope``'s attempts; False if it could not.

    Each PUT is a new write with a fresh token: were a second PUT to repeat
    the first one's bytes after a claim took the first, an ``If-Match`` on
    the first one's ETag (a claimer's step 3) would match the second (ABA).
    """
    for _ in range(REQUEUE_TRIES):
        envelope = replace(envelope, write=new_token())
        created = put_conditional(
            store,
            key,
            envelope.encode(),
            envelope.write,
            if_none_match=True,
            stats=stats,
            reason="requeue",
        )
        if created is not None:
            return True
        current = store.get(key)
        if current is None:
            # Taken since our PUT failed: write ours again (a claim's done/
            # check drops it if the job has ended meanwhile).
            continue
        if _progress(current.body) >= (envelope.redriven, envelope.attempts):
            return True
        envelope = replace(envelope, write=new_token())
        replaced = put_conditional(
            store,
            key,
            envelope.encode(),
            envelope.write,
            if_match=current.etag,
            stats=stats,
            reason="requeue",
        )
        if replaced is not None:
            return True
    return False


def _progress(body: bytes) -> tuple[int, int]:
    """How far a pending entry is: (life, attempts). Garbage and cancelled entries count as ahead.

    Garbage is dead-lettered by a claim; a cancelled entry's cancellation
    must win over a late retry. A later life's entry (a redrive) is ahead of
    every retry of an earlier life, whatever its attempts.
    """
    try:
        envelope = Envelope.decode(body)
    except DecodeError:
        return (1 << 30, 0)
    if envelope.cancelled:
        return (1 << 30, 0)
    return (envelope.redriven, envelope.attempts)


def dead_letter(
    store: Store,
    keys: Keys,
    record: LeaseRecord,
    lease_etag: str,
    *,
    error: ErrorInfo | None,
    raw: str | None = None,
    stats: WriteStats | None = None,
) -> Ending:
    """Make the job terminal as dead: the ``done/`` marker, the ``dlq/`` record, then drop the lease.

    ``done/{id}`` is the single terminal key of a job: whoever creates it
    first decides the outcome. A success that got there first wins, and the
    job is not dead-lettered.
    """
    job_id = record.job_id
    token = new_token()
    made = outcome.create(
        store,
        keys,
        job_id,
        marker_body(token),
        token,
        metadata=outcome.metadata(OUTCOME_DEAD, record),
        life=record.redriven,
        stats=stats,
        reason="dead-marker",
    )
    existing = made.existing
    if existing is not None and existing.metadata.get(META_OUTCOME) != OUTCOME_DEAD:
        if _told(store, keys, record, made.outcome, stats):
            delete_if_unchanged(store, keys.run(job_id), lease_etag)
        return Ending.ALREADY_DONE
    letter = DeadLetter(
        job_id=job_id,
        payload=record.payload,
        attempts=record.attempt,
        error=error,
        enqueued_at=record.enqueued_at,
        raw=raw,
        redriven=record.redriven,
        tags=record.tags,
        trace=record.trace,
        after=record.after,
        then=record.then,
    )
    _write_letter(store, keys, letter, stats)
    if redrive.later_life(store, keys, job_id, record.redriven):
        # We were late (a stall, a resend): a redrive took this death back while
        # we wrote it, so what we wrote is a piece of a past life. Clear it.
        redrive.finish(store, keys, job_id, record.redriven + 1)
    elif not _told(store, keys, record, OUTCOME_DEAD, stats):
        return Ending.DEAD_LETTERED  # the lease stays: the reaper finishes this and tells again
    delete_if_unchanged(store, keys.run(job_id), lease_etag)
    return Ending.DEAD_LETTERED


def _told(
    store: Store, keys: Keys, record: LeaseRecord, ended: str, stats: WriteStats | None
) -> bool:
    """Tell the job's dependents (if any) how it ended; True once they all heard."""
    if not record.then:
        return True
    return dependencies.told(store, keys, record.job_id, record.then, ended, stats=stats)


def _write_letter(store: Store, keys: Keys, letter: DeadLetter, stats: WriteStats | None) -> None:
    """Create the ``dlq/`` record; one of an earlier life already there (a late write) is replaced."""
    key = keys.dlq(letter.job_id)
    body = letter.encode()
    written = put_conditional(
        store, key, body, letter.write, if_none_match=True, stats=stats, reason="dlq"
    )
    if written is not None:
        return
    current = store.get(key)
    if current is not None and _life_of_letter(current.body, letter.job_id) < letter.redriven:
        put_conditional(
            store, key, body, letter.write, if_match=current.etag, stats=stats, reason="dlq"
        )


def _life_of_letter(body: bytes, job_id: str) -> int:
    try:
        return DeadLetter.decode(body, job_id).redriven
    except DecodeError:
        return 1 << 30  # not ours to replace
