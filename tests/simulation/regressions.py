"""The protocol bugs the simulation found, each with its seed and the code before the fix.

Every ``Regression`` names a seed that broke an invariant, and a function
that puts the pre-fix behaviour back: the old code of one protocol step,
put in through the steps' one seam (``steps.py``), which names the step and
checks that the old code still fits it. The tests replay the seed: with the runtime as it is it must pass, and with
the old behaviour put back it should fail. Any change to the protocol or the
harness reshuffles what a seed does; when the seed no longer reaches its bug,
the test looks for another nearby and warns, naming the seed to record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pail import status
from pail.codec import DYING, META_OUTCOME, OUTCOME_DEAD, Envelope, ErrorInfo, LeaseRecord
from pail.errors import ConditionFailedError, DecodeError
from pail.keys import Keys
from pail.protocol import transitions
from pail.protocol.claim import Claimer
from pail.protocol.reaper import Reaper, ReapReport
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ObjectInfo, Store, StoredObject
from tests.simulation import steps
from tests.simulation.invariants import Kind


@dataclass(frozen=True, slots=True)
class Regression:
    name: str
    seed: int | None
    """The sweep's seed that reaches the bug; None if too rare there (a schedule pins it)."""
    breaks: Kind
    story: str
    restore_bug: Callable[[pytest.MonkeyPatch], None]


def _reaper_drops_lease_of_unfinished_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    def never_take(self: Reaper, record: LeaseRecord, pending: StoredObject) -> bool:
        return False

    steps.REAPER_TAKE_CLAIMED_ENTRY.replace(monkeypatch, never_take)


def _reaper_finishes_dead_marker_only_for_dying_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = steps.REAPER_FINISH.current

    def finish(
        self: Reaper,
        record: LeaseRecord,
        etag: str,
        report: ReapReport,
        raw: str | None,
        keys: Keys,
    ) -> None:
        store: Store = self._store
        done = store.head(keys.done(record.job_id))
        dead = done is not None and done.metadata.get(META_OUTCOME) == OUTCOME_DEAD
        if dead and record.state != DYING:
            delete_if_unchanged(store, keys.run(record.job_id), etag)
            report.cleaned += 1
            return
        fixed(self, record, etag, report, raw, keys)

    steps.REAPER_FINISH.replace(monkeypatch, finish)


def _claim_trusts_first_attempt_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = steps.CLAIM_ENDED.current

    def ended(self: Claimer, envelope: Envelope, job_id: str, done: ObjectInfo | None) -> bool:
        if envelope.attempts == 0 and not envelope.redriven:
            return False
        return fixed(self, envelope, job_id, done)

    steps.CLAIM_ENDED.replace(monkeypatch, ended)


def _requeue_keeps_any_pending_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def requeue(
        store: Store,
        keys: Keys,
        record: LeaseRecord,
        lease_etag: str,
        *,
        attempts: int,
        error: ErrorInfo | None,
        stats: WriteStats | None = None,
    ) -> transitions.Ending:
        envelope = record.envelope(attempts=attempts, last_error=error)
        put_conditional(
            store,
            keys.queue(record.job_id),
            envelope.encode(),
            envelope.write,
            if_none_match=True,
            stats=stats,
        )
        delete_if_unchanged(store, keys.run(record.job_id), lease_etag)
        return transitions.Ending.REQUEUED

    steps.REQUEUE.replace(monkeypatch, requeue)


def _claim_step_three_trusts_a_missing_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim as it was before defect 3 was fixed: the known-bad step-3 variant.

    A conditional DELETE of the entry that finds it gone was read as the
    claimer's own resent delete unless ``done/`` existed, and nothing proved
    the lease before the handler started.
    """

    def take_pending(self: Claimer, key: str, etag: str) -> bool:
        store: Store = self._store
        keys: Keys = self._keys
        try:
            store.delete(key, if_match=etag)
            return True
        except ConditionFailedError:
            pass
        if store.head(key) is not None:
            return False
        return store.head(keys.done(keys.job_id(key))) is None

    steps.CLAIM_TAKE_PENDING.replace(monkeypatch, take_pending)
    steps.CLAIM_PROVE_LEASE.replace(monkeypatch, lambda self, lease: True)


def _handler_starts_before_the_delete_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17's tempting over-overlap: the claim's DELETE of the entry sent, never awaited.

    The handler then starts without knowing whether the entry was its to take
    (step 3), or whether it is gone at all.
    """

    def take_pending(self: Claimer, key: str, etag: str) -> bool:
        store: Store = self._store
        self._overlap.ahead(lambda: store.delete(key, if_match=etag))
        return True

    steps.CLAIM_TAKE_PENDING.replace(monkeypatch, take_pending)


def _markers_all_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every dead and cancelled marker is the same four bytes, ``null`` (issue 18, defect 0)."""
    steps.MARKER_BYTES.replace(monkeypatch, lambda token: b"null")


def _nobody_clears_a_half_done_redrive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead marker of an earlier life counts as the job's outcome (defect 4)."""
    steps.REDRIVE_TOOK_BACK.replace(monkeypatch, lambda *args, **kwargs: False)


def _status_reads_the_entry_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """``status`` reads ``queue/`` before ``done/``: a late retry entry hides the outcome (defect 7)."""
    fixed = steps.STATUS_READ.current

    def read_once(store: Store, keys: Keys, job_id: str) -> status.JobStatus | None:
        entry = store.get(keys.queue(job_id))
        if entry is not None:
            return status.JobStatus(job_id, status.JobState.PENDING, 0, None, entry.last_modified)
        return fixed(store, keys, job_id)

    steps.STATUS_READ.replace(monkeypatch, read_once)


def _late_dead_letter_keeps_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead-letter that lands after a redrive took its death back is not cleared."""
    steps.REDRIVE_LATER_LIFE.replace(monkeypatch, lambda *args, **kwargs: False)


def _reaper_compares_attempts_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reaper takes any entry with fewer attempts than its lease for the claim's own."""

    def take(self: Reaper, record: LeaseRecord, pending: StoredObject) -> bool:
        store: Store = self._store
        try:
            envelope = Envelope.decode(pending.body)
        except DecodeError:
            return False
        if envelope.cancelled or envelope.attempts >= record.attempt:
            return False
        try:
            store.delete(pending.key, if_match=pending.etag)
        except ConditionFailedError:
            return store.head(pending.key) is None
        return True

    steps.REAPER_TAKE_CLAIMED_ENTRY.replace(monkeypatch, take)


def _requeue_repeats_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A requeue that tries its PUT again sends the same body (and token) again."""

    def ensure_pending(
        store: Store, key: str, envelope: Envelope, stats: WriteStats | None
    ) -> bool:
        body = envelope.encode()
        for _ in range(transitions.REQUEUE_TRIES):
            if put_conditional(store, key, body, envelope.write, if_none_match=True) is not None:
                return True
            current = store.get(key)
            if current is None:
                continue
            if Envelope.decode(current.body).attempts >= envelope.attempts:
                return True
            if put_conditional(store, key, body, envelope.write, if_match=current.etag):
                return True
        return False

    steps.REQUEUE_ENSURE_PENDING.replace(monkeypatch, ensure_pending)


REGRESSIONS = (
    Regression(
        "stalled-claim-loses-job",
        6,
        Kind.LOST,
        "A claim stalls between PUT run/ and DELETE queue/; the reaper finds the expired "
        "lease with its pending entry still there and drops the lease; the claim resumes and "
        "its DELETE queue/ If-Match succeeds (the entry is unchanged): no object is left.",
        _reaper_drops_lease_of_unfinished_claim,
    ),
    Regression(
        "reaped-dead-marker-without-dlq",
        208,
        Kind.TERMINAL,
        "A reaper fences an expired lease with no retries left and writes the dead marker, "
        "then dies; the next reaper sees a RUNNING (not DYING) lease beside the marker and only "
        "drops the lease: the job is dead with no dlq/ record, its payload gone.",
        _reaper_finishes_dead_marker_only_for_dying_lease,
    ),
    Regression(
        "retried-enqueue-runs-finished-job",
        78,
        Kind.RESENT_ENQUEUE_RERUN,
        "The producer's create-only PUT queue/ lands but its response is lost; a worker claims "
        "and finishes the job; botocore's resend finds the key free and creates the entry again; "
        "a claim that skips the done/ check for first attempts runs the finished job again.",
        _claim_trusts_first_attempt_entries,
    ),
    Regression(
        "stale-entry-resets-attempts",
        7509,
        Kind.RETRY_POLICY,
        "A stale pending entry with fewer attempts (a stalled worker's late retry, or an "
        "enqueue resent while attempt 1 runs) meets requeue's create-only PUT, which keeps it: "
        "earlier attempts run again, and the job runs more than max_retries + 1 times.",
        _requeue_keeps_any_pending_entry,
    ),
    Regression(
        "stalled-claimer-runs-in-parallel",
        2,
        Kind.PARALLEL,
        "A claimer stalls after its lease write (or after deleting the entry) past the lease; "
        "the reaper fences the lease and requeues the job; another worker claims and runs it. "
        "The first wakes, its DELETE of the entry finds it gone (sent once: the reaper took "
        "it), reads that as its own resent delete, finds no done/, and starts the handler "
        "while the other worker's lease is live (issue 12, defect 3).",
        _claim_step_three_trusts_a_missing_entry,
    ),
    Regression(
        "handler-starts-before-the-delete-answers",
        175,
        Kind.RETRY_POLICY,
        "The claim sends its DELETE of the entry beside the HEAD of done/ (issue 17) but starts "
        "the handler without waiting for the DELETE's answer. The DELETE fails (a 409, then a "
        "5xx, past the client's tries): the entry stays beside the running job, and once the "
        "attempt settles the job runs again from it: attempt 2 twice, past max_retries.",
        _handler_starts_before_the_delete_answers,
    ),
    Regression(
        "redrive-deletes-a-cancellation",
        615,
        Kind.RESULT_CHANGED,
        "Dead and cancelled markers are both the bytes null, so both have one ETag: a redrive "
        "whose DELETE done/ is If-Match the dead marker's ETag also deletes a cancelled marker "
        "written in between (issue 18, defect 0).",
        _markers_all_null,
    ),
    Regression(
        "half-done-redrive-dead-again",
        668,
        Kind.TERMINAL,
        "A redrive stops after writing the new entry (or after deleting the record); the claim "
        "of the redriven entry finds the old dead marker and takes it for the job's end: the job "
        "dies again with no record, or is done with the old record left (issue 12, defect 4).",
        _nobody_clears_a_half_done_redrive,
    ),
    Regression(
        "late-retry-entry-hides-done",
        198,
        Kind.STATUS,
        "A stalled owner's retry entry lands after another worker finished the job; status "
        "reads queue/ first and says pending for a done job (issue 12, defect 7).",
        _status_reads_the_entry_first,
    ),
    Regression(
        "late-dead-letter-outlives-redrive",
        89,
        Kind.TERMINAL,
        "A dead-letter writer stalls (or its dlq/ PUT is resent late); the reaper finishes the "
        "dead-letter, an operator redrives the job, and the late write re-creates the record "
        "of the death taken back: the job lives on with a dead-letter beside it.",
        _late_dead_letter_keeps_its_record,
    ),
    Regression(
        "stale-lease-takes-a-redriven-entry",
        65117,
        Kind.LOST,
        "A claimer reads an entry, stalls, and writes its lease after the job died and was "
        "redriven; it crashes. The reaper fences that stale lease and takes the redriven "
        "entry (fewer attempts) for the one the stale claim read: it deletes the new life's "
        "entry, and the job is lost or dies with the old life's record.",
        _reaper_compares_attempts_only,
    ),
    Regression(
        "requeue-repeats-its-bytes",
        17239,
        Kind.SAME_BYTES,
        "A requeue's create-only PUT lands, a claim takes the entry, and the requeue's next try "
        "writes the same bytes again: a claimer holding the first entry's ETag would match it.",
        _requeue_repeats_its_bytes,
    ),
)
