"""The second half of every transition out of ``run/{id}``.

An owner decides (retry or dead-letter) by rewriting its lease under
``If-Match``, which is the commit point. The writes after it are the same
whether the owner does them or, after the owner died, the reaper does: so
they live here, once, and both call them.

Each function is idempotent: run twice, or after a crash half-way, it ends
in the same state.
"""

from __future__ import annotations

from enum import StrEnum

from pail.codec import (
    DEAD_MARKER,
    META_ATTEMPT,
    META_OUTCOME,
    OUTCOME_DEAD,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
)
from pail.errors import DecodeError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store

REQUEUE_TRIES = 3


class Ending(StrEnum):
    """How a transition out of ``run/{id}`` ended."""

    REQUEUED = "requeued"
    DEAD_LETTERED = "dead_lettered"
    ALREADY_DONE = "already_done"


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

    If a pending entry already exists with at least as many attempts, it is
    kept: it was written by an earlier try of this same transition, and the
    job is pending, which is what this step must ensure. One with fewer
    attempts is stale (a stalled worker's late retry, or a producer's PUT
    that botocore retried after a worker had claimed the job) and is
    replaced under ``If-Match``: kept, it would run attempts over again,
    past ``max_retries``. The lease is dropped only once the job is surely
    pending; otherwise it stays, deciding a retry, for the reaper to finish.
    """
    envelope = record.envelope(attempts=attempts, last_error=error)
    if _ensure_pending(store, keys.queue(record.job_id), envelope, stats):
        delete_if_unchanged(store, keys.run(record.job_id), lease_etag)
    return Ending.REQUEUED


def _ensure_pending(store: Store, key: str, envelope: Envelope, stats: WriteStats | None) -> bool:
    """Make ``key`` a pending entry with at least ``envelope``'s attempts; False if it could not."""
    body = envelope.encode()
    for _ in range(REQUEUE_TRIES):
        created = put_conditional(
            store, key, body, envelope.write, if_none_match=True, stats=stats, reason="requeue"
        )
        if created is not None:
            return True
        current = store.get(key)
        if current is None:
            # Taken since our PUT failed: write ours again (a claim's done/
            # check drops it if the job has ended meanwhile).
            continue
        if _attempts(current.body) >= envelope.attempts:
            return True
        replaced = put_conditional(
            store, key, body, envelope.write, if_match=current.etag, stats=stats, reason="requeue"
        )
        if replaced is not None:
            return True
    return False


def _attempts(body: bytes) -> int:
    """The attempts of a pending entry; garbage counts as current (it is dead-lettered by a claim)."""
    try:
        envelope = Envelope.decode(body)
    except DecodeError:
        return 1 << 30
    # A cancelled entry is kept: its cancellation must win over a late retry.
    return 1 << 30 if envelope.cancelled else envelope.attempts


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
    marker = put_conditional(
        store,
        keys.done(job_id),
        DEAD_MARKER,
        new_token(),
        if_none_match=True,
        metadata={META_OUTCOME: OUTCOME_DEAD, META_ATTEMPT: str(record.attempt)},
        stats=stats,
        reason="dead-marker",
    )
    if marker is None:
        existing = store.head(keys.done(job_id))
        if existing is not None and existing.metadata.get(META_OUTCOME) != OUTCOME_DEAD:
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
    )
    put_conditional(
        store,
        keys.dlq(job_id),
        letter.encode(),
        letter.write,
        if_none_match=True,
        stats=stats,
        reason="dlq",
    )
    delete_if_unchanged(store, keys.run(job_id), lease_etag)
    return Ending.DEAD_LETTERED
