"""How the owner of a lease ends its attempt: complete, fail (retry or dead-letter), release.

Each first proves it still owns the lease. ``complete`` renews only when the
lease is close to expiry (a success needs no commit record: ``done/{id}`` is
created once, so a late duplicate cannot overwrite it). Once ``done/{id}``
is written the outcome is decided, so ``complete`` returns without waiting
for the lease's removal: it goes to the worker's overlap pool
(``Overlap.later``), and a crash before it lands is repaired by the reaper,
which finds ``done/``. ``fail`` and
``release`` always rewrite the lease to record their decision; that write is
fenced by ``If-Match`` and is the commit point the reaper resumes from if the
owner dies before finishing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pail.codec import (
    DYING,
    OUTCOME_SUCCEEDED,
    RETRYING,
    ErrorInfo,
    encode_result,
)
from pail.errors import LeaseLostError
from pail.keys import Keys
from pail.protocol import dependencies, limits, outcome, transitions
from pail.protocol.lease import Lease
from pail.protocol.overlap import SEQUENTIAL, Overlap
from pail.protocol.retry import RetryPolicy
from pail.protocol.writes import WriteStats, delete_if_unchanged
from pail.store.base import Store

log = logging.getLogger("pail")


@dataclass(frozen=True, slots=True)
class Policy:
    """What the settling side needs to know about the queue."""

    max_retries: int | None
    visibility_timeout: float
    retry: RetryPolicy | None = None

    def backoff(self, attempt: int, job_id: str) -> float:
        """Seconds the retry after failed attempt ``attempt`` waits (0: pending at once)."""
        return self.retry.delay(attempt, job_id) if self.retry is not None else 0.0

    @property
    def margin(self) -> float:
        """Renew before acting when less than this much of the lease surely remains."""
        return self.visibility_timeout / 3

    def exhausted(self, attempt: int) -> bool:
        """True when attempt number ``attempt`` (1-based) was the last one allowed."""
        return self.max_retries is not None and attempt > self.max_retries


def complete(
    store: Store,
    keys: Keys,
    lease: Lease,
    result: object,
    policy: Policy,
    stats: WriteStats | None = None,
    *,
    overlap: Overlap = SEQUENTIAL,
    read_ahead: Callable[[], None] | None = None,
) -> bool:
    """Record ``result`` as the job's outcome; True if it is the one that counts.

    Raises ``PayloadError`` (before writing anything) if ``result`` is not
    JSON-serialisable, and ``LeaseLostError`` if the lease was taken over.
    The lease is then removed through ``overlap`` (in the background, with
    ``Threads``); ``read_ahead`` (the claimer's) starts the next claim's
    first read while the result is written.
    """
    body = encode_result(result)
    try:
        return _complete(store, keys, lease, body, policy, stats, overlap, read_ahead)
    finally:
        limits.give_back(store, lease)  # if an error came first: the handler is over


def _complete(
    store: Store,
    keys: Keys,
    lease: Lease,
    body: bytes,
    policy: Policy,
    stats: WriteStats | None,
    overlap: Overlap,
    read_ahead: Callable[[], None] | None,
) -> bool:
    lease.ensure(policy.margin)
    if read_ahead is not None:
        read_ahead()
    record = lease.record

    def create() -> outcome.Created:
        return outcome.create(
            store,
            keys,
            lease.job_id,
            body,
            record.write + "-done",
            metadata=outcome.metadata(OUTCOME_SUCCEEDED, record),
            life=record.redriven,
            stats=stats,
            reason="done",
        )

    if lease.slots:
        # The handler is over: its slots go back beside the result's write (no wait
        # of their own), and have landed before the worker's next claim tries them.
        created, _ = overlap.both(create, lambda: limits.give_back(store, lease))
        made = created.get()
    else:
        made = create()
    key, etag = lease.key, lease.etag
    if record.then and not dependencies.told(
        store, keys, lease.job_id, record.then, made.outcome, stats=stats
    ):
        # Its dependents have not all heard: the lease stays for the reaper,
        # which finds done/{id} and tells them before it removes the lease.
        return made.written is not None
    # The outcome is decided (ours or another's): the lease's removal decides
    # nothing, so nobody waits for it. Lost, the reaper removes the lease once
    # it expires (it finds done/{id}).
    overlap.later(
        f"job {lease.job_id}: removing its lease", lambda: delete_if_unchanged(store, key, etag)
    )
    if made.written is None:
        log.warning("job %s already had an outcome; this result was dropped", lease.job_id)
        return False
    return True


def fail(
    store: Store,
    keys: Keys,
    lease: Lease,
    error: ErrorInfo,
    policy: Policy,
    stats: WriteStats | None = None,
) -> transitions.Ending:
    """Fail this attempt: back to the queue, or to the DLQ when retries are exhausted."""
    try:
        return _end_attempt(store, keys, lease, error, policy, stats, backoff=True)
    finally:
        limits.give_back(store, lease)


def _end_attempt(
    store: Store,
    keys: Keys,
    lease: Lease,
    error: ErrorInfo,
    policy: Policy,
    stats: WriteStats | None,
    *,
    backoff: bool,
) -> transitions.Ending:
    """End a started attempt with ``error``: decide (the lease rewrite), then requeue or dead-letter.

    With ``backoff`` (a failure, not a release) a retry may wait: the
    decision, with its wait, is then the whole step.
    """
    attempt = lease.record.attempt
    error = ErrorInfo(error.type, error.message, error.traceback, attempt)
    dying = policy.exhausted(attempt)
    wait = policy.backoff(attempt, lease.job_id) if backoff and not dying else 0.0
    if wait > 0:
        # The reaper requeues the job once this lease is older than ``retry_after``.
        lease.renew(state=RETRYING, error=error, retry_after=wait)
        return transitions.Ending.REQUEUED
    lease.renew(state=DYING if dying else RETRYING, error=error)
    record, etag = lease.record, lease.etag
    if dying:
        return transitions.dead_letter(store, keys, record, etag, error=error, stats=stats)
    ending = transitions.requeue(
        store, keys, record, etag, attempts=attempt, error=error, stats=stats
    )
    return _requeued(lease, ending)


def _requeued(lease: Lease, ending: transitions.Ending) -> transitions.Ending:
    """``ending``, or ``LeaseLostError`` if the lease was taken over while the job was requeued.

    We stalled after deciding: the reaper fenced the lease and finished the
    retry itself. Our entry may land late, beside a job that moved on; the
    claim that meets it drops it, and status reads done/ first.
    """
    if ending is transitions.Ending.LEASE_LOST:
        lease.mark_lost()
        raise LeaseLostError(f"job {lease.job_id}: the lease was taken over while it was requeued")
    return ending


def release(
    store: Store,
    keys: Keys,
    lease: Lease,
    reason: ErrorInfo,
    policy: Policy,
    *,
    started: bool,
    stats: WriteStats | None = None,
) -> transitions.Ending:
    """Give the job back to the queue now: a release never waits out a retry backoff.

    ``started`` says whether the handler began this attempt. If it did not
    (the job was claimed too late to run), the attempt is not spent: the job
    goes back exactly as it was, with the attempts and the last error it had.
    If it did, the attempt counts and ``reason`` becomes the job's last error,
    so a job that never fits the time available dead-letters once its retries
    are spent instead of cycling forever.
    """
    try:
        return _release(store, keys, lease, reason, policy, started=started, stats=stats)
    finally:
        limits.give_back(store, lease)


def _release(
    store: Store,
    keys: Keys,
    lease: Lease,
    reason: ErrorInfo,
    policy: Policy,
    *,
    started: bool,
    stats: WriteStats | None,
) -> transitions.Ending:
    if not started:
        lease.renew(state=RETRYING, uncounted=True)
        record = lease.record
        ending = transitions.requeue(
            store,
            keys,
            record,
            lease.etag,
            attempts=record.attempts_used,
            error=record.error,
            stats=stats,
        )
        return _requeued(lease, ending)
    return _end_attempt(store, keys, lease, reason, policy, stats, backoff=False)


def settle_quietly(action: str, job_id: str, exc: LeaseLostError) -> None:
    """Log a settle step that found its lease gone: another worker owns the job now."""
    log.warning("job %s: could not %s: %s", job_id, action, exc)
