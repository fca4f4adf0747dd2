"""The protocol bugs the simulation found, each with its seed and the code before the fix.

Every ``Regression`` names a seed that broke an invariant, and a function
that puts the pre-fix behaviour back (by monkeypatching one function of
the protocol). The tests replay the seed: with the runtime as it is it must pass, and with
the old behaviour put back it should fail. Any change to the protocol or the
harness reshuffles what a seed does; when the seed no longer reaches its bug,
the test looks for another nearby and warns, naming the seed to record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pail.codec import DYING, META_OUTCOME, OUTCOME_DEAD, Envelope, ErrorInfo, LeaseRecord
from pail.keys import Keys
from pail.protocol import transitions
from pail.protocol.claim import Claimer
from pail.protocol.reaper import Reaper, ReapReport
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store, StoredObject
from tests.simulation.invariants import Kind


@dataclass(frozen=True, slots=True)
class Regression:
    name: str
    seed: int
    breaks: Kind
    story: str
    restore_bug: Callable[[pytest.MonkeyPatch], None]


def _reaper_drops_lease_of_unfinished_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    def never_take(self: Reaper, record: LeaseRecord, pending: StoredObject) -> bool:
        return False

    monkeypatch.setattr(Reaper, "_take_claimed_entry", never_take)


def _reaper_finishes_dead_marker_only_for_dying_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = Reaper._finish

    def finish(
        self: Reaper, record: LeaseRecord, etag: str, report: ReapReport, raw: str | None
    ) -> None:
        store: Store = self._store
        keys: Keys = self._keys
        done = store.head(keys.done(record.job_id))
        dead = done is not None and done.metadata.get(META_OUTCOME) == OUTCOME_DEAD
        if dead and record.state != DYING:
            delete_if_unchanged(store, keys.run(record.job_id), etag)
            report.cleaned += 1
            return
        fixed(self, record, etag, report, raw)

    monkeypatch.setattr(Reaper, "_finish", finish)


def _claim_trusts_first_attempt_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = Claimer._ended

    def ended(self: Claimer, envelope: Envelope, job_id: str) -> bool:
        if envelope.attempts == 0 and not envelope.redriven:
            return False
        return fixed(self, envelope, job_id)

    monkeypatch.setattr(Claimer, "_ended", ended)


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

    monkeypatch.setattr(transitions, "requeue", requeue)


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
        90,
        Kind.TERMINAL,
        "A reaper fences an expired lease with no retries left and writes the dead marker, "
        "then dies; the next reaper sees a RUNNING (not DYING) lease beside the marker and only "
        "drops the lease: the job is dead with no dlq/ record, its payload gone.",
        _reaper_finishes_dead_marker_only_for_dying_lease,
    ),
    Regression(
        "retried-enqueue-runs-finished-job",
        1603,
        Kind.RESENT_ENQUEUE_RERUN,
        "The producer's create-only PUT queue/ lands but its response is lost; a worker claims "
        "and finishes the job; botocore's resend finds the key free and creates the entry again; "
        "a claim that skips the done/ check for first attempts runs the finished job again.",
        _claim_trusts_first_attempt_entries,
    ),
    Regression(
        "stale-entry-resets-attempts",
        14345,
        Kind.RETRY_POLICY,
        "A stale pending entry with fewer attempts (a stalled worker's late retry, or an "
        "enqueue resent while attempt 1 runs) meets requeue's create-only PUT, which keeps it: "
        "earlier attempts run again, and the job runs more than max_retries + 1 times.",
        _requeue_keeps_any_pending_entry,
    ),
)
