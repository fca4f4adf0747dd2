"""Cancelling a job: a pending job never runs, a running one loses its lease.

``done/{id}`` is the single terminal key, so a cancellation is one more
outcome written there, create-only (body ``null``, outcome ``cancelled``):
it is exclusive with a success and with a dead-letter, whichever comes first.

- **Pending**: the entry is first rewritten under ``If-Match`` with
  ``cancelled: true`` (the commit point). A claimer that reads such an entry
  finishes the cancellation instead of running it, so a crash after the
  commit point never lets the job run. Then the terminal marker, then the
  entry is deleted under ``If-Match``.
- **Running**: the terminal marker, then the lease is deleted under
  ``If-Match``. The owner's next renewal fails, ``Message.lease_lost`` and
  ``Message.cancelled`` turn True, and whatever it writes afterwards fails
  (its ``complete`` loses to the marker, its retry entry is dropped by the
  claim's ``done/`` check).

``docs/protocol.md`` ("Cancel") has the crash analysis.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pail.codec import (
    META_OUTCOME,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    Envelope,
    LeaseRecord,
    check_carried,
    marker_body,
)
from pail.errors import DecodeError, JobNotFoundError, PayloadError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol import delay, dependencies
from pail.protocol import outcome as outcome_writer
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store, StoredObject

log = logging.getLogger("pail")

ROUNDS = 4
"""Looks at the job before giving up: each lost race means the job moved on, so this is plenty."""


def cancel(store: Store, keys: Keys, job_id: str, *, stats: WriteStats | None = None) -> bool:
    """Cancel ``job_id``; True if it is cancelled now (by this call or an earlier one).

    False if the job had already ended otherwise (succeeded or dead-lettered).
    Raises ``JobNotFoundError`` if no object of the job exists.

    In a sharded queue, each shard the job may live in (``Keys.layouts``), in turn.
    """
    layouts = keys.layouts(job_id)
    for layout in layouts[:-1]:
        try:
            return _cancel_in(store, layout, job_id, stats)
        except JobNotFoundError:
            continue
    return _cancel_in(store, layouts[-1], job_id, stats)


def _cancel_in(store: Store, keys: Keys, job_id: str, stats: WriteStats | None) -> bool:
    for _ in range(ROUNDS):
        pending = store.get(keys.queue(job_id))
        if pending is not None:
            cancelled = cancel_entry(store, keys, job_id, pending, stats=stats)
            if cancelled is None:
                continue  # claimed or replaced since we read it: look again
            return cancelled
        running = store.get(keys.run(job_id))
        if running is None:
            ended = _outcome(store, keys, job_id)
            if ended is not None:
                return ended == OUTCOME_CANCELLED
            waiting = delay.find(store, keys, job_id)
            if waiting is not None:
                return cancel_delayed(store, keys, job_id, waiting.key, waiting.etag, stats)
            continue  # between two states (a retry being written): look again
        life, then = _edges(running.body, job_id)
        outcome = _mark_terminal(store, keys, job_id, stats, life)
        if outcome != OUTCOME_CANCELLED:
            return False
        if then and not dependencies.told(store, keys, job_id, then, outcome, stats=stats):
            return True  # the lease stays: the reaper finds the marker and tells them again
        _drop_lease(store, keys, job_id, running.etag)
        return True
    if _outcome(store, keys, job_id) == OUTCOME_CANCELLED:
        return True
    # Looked for last: a job waiting for its dependencies has none of the other objects
    # (and a job with one of them costs nothing more to cancel).
    if _cancel_waiting(store, keys, job_id, stats):
        return True
    raise JobNotFoundError(f"no job {job_id!r} to cancel")


def cancel_entry(
    store: Store,
    keys: Keys,
    job_id: str,
    pending: StoredObject,
    *,
    stats: WriteStats | None = None,
) -> bool | None:
    """Cancel the job of the pending entry ``pending`` (as read): steps 2-4 of "Cancel".

    True if the job is cancelled, False if it had already ended otherwise,
    None if the entry changed or went since it was read (claimed, retried,
    replaced): then nothing was written, and the caller decides whether to
    look again. ``pail.operate.purge`` calls it so that a purge never
    follows a job into ``run/``.
    """
    etag = pending.etag
    try:
        envelope = Envelope.decode(pending.body)
        check_carried(envelope.payload)
    except (DecodeError, PayloadError):
        envelope = None  # foreign bytes: nothing can run them, just end the job
    if envelope is not None and not envelope.cancelled:
        marked = replace(envelope, cancelled=True, write=new_token())
        won = put_conditional(
            store,
            pending.key,
            marked.encode(),
            marked.write,
            if_match=etag,
            stats=stats,
            reason="cancel",
        )
        if won is None:
            return None
        etag = won.etag
    life = envelope.redriven if envelope is not None else 0
    then = envelope.then if envelope is not None else ()
    return finish_pending(store, keys, job_id, etag, life=life, then=then, stats=stats)


def finish_pending(
    store: Store,
    keys: Keys,
    job_id: str,
    entry_etag: str,
    *,
    life: int = 0,
    then: tuple[str, ...] = (),
    stats: WriteStats | None = None,
) -> bool:
    """End a pending entry marked cancelled: the terminal marker, then delete the entry.

    Idempotent; claimers call it for every cancelled entry they read, so a
    cancellation that crashed after its commit point is finished by them.
    True if the job is cancelled, False if it had already ended otherwise
    (a stale retry entry of a finished job): either way the entry goes.

    A redriven entry (of life ``life``, its ``redriven`` count) may belong to
    a redrive that stopped before removing the death it took back: the marker
    write clears that death first (``outcome.create``), so that the
    cancellation, not the old death, is the outcome; nothing of this life is
    touched (each delete is ``If-Match``).
    """
    outcome = _mark_terminal(store, keys, job_id, stats, life)
    if then and not dependencies.told(store, keys, job_id, then, outcome, stats=stats):
        # The cancelled entry stays: the next claim that reads it finishes this again.
        return outcome == OUTCOME_CANCELLED
    delete_if_unchanged(store, keys.queue(job_id), entry_etag)
    return outcome == OUTCOME_CANCELLED


def cancel_delayed(
    store: Store, keys: Keys, job_id: str, key: str, etag: str, stats: WriteStats | None = None
) -> bool:
    """A delayed job: the marker, then its entry. Promoted meanwhile, its claim sees the marker."""
    outcome = _mark_terminal(store, keys, job_id, stats)
    delete_if_unchanged(store, key, etag)
    return outcome == OUTCOME_CANCELLED


def was_cancelled(store: Store, keys: Keys, job_id: str) -> bool:
    """True if ``done/{id}`` says the job was cancelled (one HEAD)."""
    return _outcome(store, keys, job_id) == OUTCOME_CANCELLED


def _mark_terminal(
    store: Store,
    keys: Keys,
    job_id: str,
    stats: WriteStats | None,
    life: int = 0,
) -> str:
    """Create the cancelled marker unless the job has an outcome; return the job's outcome."""
    token = new_token()
    made = outcome_writer.create(
        store,
        keys,
        job_id,
        marker_body(token),
        token,
        metadata=outcome_writer.metadata(OUTCOME_CANCELLED, life=life),
        life=life,
        stats=stats,
        reason="cancel-marker",
    )
    if made.written is not None:
        return OUTCOME_CANCELLED
    if made.existing is None:
        return _outcome(store, keys, job_id) or OUTCOME_DEAD
    # No pail metadata: written by pailq 0.1.1, a success.
    return made.existing.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)


def _edges(lease_body: bytes, job_id: str) -> tuple[int, tuple[str, ...]]:
    """The life and the dependents of the lease in ``lease_body`` (foreign bytes: 0 and none)."""
    try:
        record = LeaseRecord.decode(lease_body, job_id)
    except DecodeError:
        return 0, ()
    return record.redriven, record.then


def _cancel_waiting(store: Store, keys: Keys, job_id: str, stats: WriteStats | None) -> bool:
    """A job waiting for its dependencies: its marker, its dependents told, its record gone.

    False if it is not waiting (or its record is foreign bytes, left alone and logged).
    """
    found = dependencies.find(store, keys, job_id)
    if found is None:
        return False
    layout, current = found
    try:
        record = dependencies.WaitingJob.decode(current.body, job_id)
    except DecodeError as exc:
        log.warning("cancel: %s is not a waiting job pail can act on: %s", current.key, exc)
        return False
    return dependencies.end(
        store, layout, record, current.etag, OUTCOME_CANCELLED, None, stats=stats
    )


def _outcome(store: Store, keys: Keys, job_id: str) -> str | None:
    done = store.head(keys.done(job_id))
    if done is None:
        return None
    # No pail metadata: written by pailq 0.1.1, a success.
    return done.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)


def _drop_lease(store: Store, keys: Keys, job_id: str, etag: str) -> None:
    """Delete the running lease so its owner's next renewal fails; the owner may renew meanwhile."""
    for _ in range(ROUNDS):
        if delete_if_unchanged(store, keys.run(job_id), etag):
            return
        current = store.head(keys.run(job_id))
        if current is None:
            return
        etag = current.etag
    # Still renewing under our feet: harmless, the owner's writes all lose to
    # the marker and it drops its lease when it settles (or the reaper does).
