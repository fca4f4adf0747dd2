"""The known-bad variants: the protocol bugs the simulation found, and bugs put in on purpose.

Every ``Regression`` names a seed that broke an invariant, the family of runs
that seed belongs to (the main sweep, the sharded or pausing one, foreign
writers), and a function that puts the known-bad behaviour back: the old code
of one protocol step (or a step broken on purpose, to show that an invariant
kind can fail at all), put in through the steps' one seam (``steps.py``),
which names the step and checks that the variant still fits it.

The tests replay each one as a **hard** check: with the runtime as it is, its
seed must pass; with the variant put in, its invariant must break at the
recorded seed or at one of the first ``search`` seeds of its family. Any
change to the protocol or the harness reshuffles what a seed does; a bug
frequent enough is still found among the first seeds, and a rare one
(``search=0``: its seed is the pin) fails the test until a new seed is
recorded (``scripts/simulate --known-bad NAME`` finds them). A variant the
sweep finds too rarely for either is pinned by a schedule as well
(``test_schedules.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pytest

from pail import status
from pail.codec import (
    DYING,
    META_OUTCOME,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    Envelope,
    ErrorInfo,
    LeaseRecord,
)
from pail.errors import ConditionFailedError, DecodeError, PailError
from pail.keys import Keys
from pail.protocol import dedup, transitions
from pail.protocol.claim import Claimer, Skip
from pail.protocol.dependencies.graph import Flow, put_waiting
from pail.protocol.enqueue import put_pending
from pail.protocol.lease import Lease
from pail.protocol.reaper import Reaper, ReapReport
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ObjectInfo, Store, StoredObject
from tests.simulation import steps
from tests.simulation.invariants import Kind

if TYPE_CHECKING:
    from tests.simulation.harness import Outcome


class Family(StrEnum):
    """The runs a variant's seed belongs to: ``run_seed``'s flags, as the sweeps run them."""

    MAIN = "main"
    SHARDED = "sharded"
    PAUSING = "pausing"
    HOSTILE = "hostile"


@dataclass(frozen=True, slots=True)
class Regression:
    name: str
    seed: int | None
    """A seed of ``family`` whose run breaks ``breaks`` with the variant put in; None when no
    seed reaches it often enough to pin, and ``schedule`` is the hard check instead."""
    breaks: Kind
    story: str
    restore_bug: Callable[[pytest.MonkeyPatch], None]
    search: int = 0
    """How many of the family's first seeds the test also tries if ``seed`` stops reaching the
    bug (0: the seed is the pin; a change that reshuffles it fails the test)."""
    family: Family = Family.MAIN
    schedule: str | None = None
    """The name of a pinned schedule (``schedules.ALL``) whose run breaks ``breaks`` with the
    variant put in, every time: the check of a variant too rare in the sweep for a seed."""

    def run(self, seed: int) -> Outcome:
        """The run of ``seed`` in this variant's family (with whatever code is in place)."""
        from tests.simulation.harness import run_seed

        return run_seed(
            seed,
            sharded=self.family is Family.SHARDED,
            pausing=self.family is Family.PAUSING,
            hostile=self.family is Family.HOSTILE,
        )

    def replay(self, seed: int) -> str:
        """The command that replays ``seed`` of this variant's family, the variant left out."""
        flag = "" if self.family is Family.MAIN else f" --{self.family}"
        return f"scripts/simulate --seed {seed}{flag}"


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


def _redrive_never_looks_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A redrive deletes the record, then the marker, and does not look at the record again."""
    steps.REDRIVE_CLEAR_LATE_RECORD.replace(monkeypatch, lambda *args, **kwargs: None)


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


def _pause_check_failure_keeps_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refill before the fix of pausing seed 14: a failed pause check left the page cached."""
    fixed = steps.CLAIM_REFILL.current

    def refill(self: Claimer) -> None:
        setattr(self, "forget", lambda: None)  # noqa: B010 - the old refill forgot nothing
        try:
            fixed(self)
        finally:
            delattr(self, "forget")

    steps.CLAIM_REFILL.replace(monkeypatch, refill)


def _cancel_says_cancelled_whatever_ended_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancellation that finds its marker beaten by another outcome still says cancelled."""
    fixed = steps.CANCEL_MARK.current

    def mark(*args: Any, **kwargs: Any) -> str:
        fixed(*args, **kwargs)
        return OUTCOME_CANCELLED

    steps.CANCEL_MARK.replace(monkeypatch, mark)


def _requeue_in_the_workers_own_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A requeue that names the entry by its worker's shard count, not by the job's shard."""
    fixed = steps.REQUEUE.current

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
        unpinned = replace(keys, pin=None)
        return fixed(
            store, unpinned, record, lease_etag, attempts=attempts, error=error, stats=stats
        )

    steps.REQUEUE.replace(monkeypatch, requeue)


def _claim_raises_on_foreign_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim that lets an entry's decoding error out instead of quarantining the entry."""

    def quarantine(self: Claimer, job_id: str, pending: StoredObject, exc: PailError) -> Skip:
        raise RuntimeError(f"cannot run {pending.key}: {exc}")

    steps.CLAIM_QUARANTINE.replace(monkeypatch, quarantine)


def _claim_drops_an_ended_entry_untold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim as it was: an entry of an ended job dropped without telling its dependents."""
    steps.CLAIM_TELL_ENDED.replace(monkeypatch, lambda self, record, done: True)


def _keyed_repair_writes_an_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyed repair as it was before ``after=`` met keys: it writes the pending entry."""

    def repair(
        store: Store,
        keys: Keys,
        record: dedup.KeyRecord,
        now: datetime,
        stats: WriteStats | None,
    ) -> None:
        envelope = record.envelope
        target = keys.queue(record.job_id)
        put_conditional(
            store, target, envelope.encode(), envelope.write, if_none_match=True, stats=stats
        )

    steps.DEDUP_REPAIR.replace(monkeypatch, repair)


def _reaper_leaves_expired_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reaper that finds expired leases and leaves them: a crashed worker's job never ends."""

    def reclaim(
        self: Reaper, item: ObjectInfo, job_id: str, report: ReapReport, age: float, keys: Keys
    ) -> None:
        return None

    steps.REAPER_RECLAIM.replace(monkeypatch, reclaim)


def _fan_out_writes_the_children_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fan-out that writes its children before its continuation's waiting record."""

    def fan_out(
        store: Store,
        keys: Keys,
        lease: Lease,
        flow: Flow,
        children: Sequence[Any],
        then: Any,
        *,
        now: datetime,
        on_failure: str = "dead-letter",
        stats: WriteStats | None = None,
    ) -> Flow:
        if flow.then not in lease.record.then:
            lease.renew(then=(*lease.record.then, flow.then))
        for payload, job_id in zip(children, flow.children, strict=True):
            put_pending(store, keys, payload, job_id, now=now, then=(flow.then,), stats=stats)
        after = (*flow.children, lease.job_id)
        put_waiting(store, keys, then, flow.then, after, now=now, on_failure=on_failure)
        return flow

    steps.FAN_OUT.replace(monkeypatch, fan_out)


REGRESSIONS = (
    Regression(
        "stalled-claim-loses-job",
        56,
        Kind.LOST,
        "A claim stalls between PUT run/ and DELETE queue/; the reaper finds the expired "
        "lease with its pending entry still there and drops the lease; the claim resumes and "
        "its DELETE queue/ If-Match succeeds (the entry is unchanged): no object is left.",
        _reaper_drops_lease_of_unfinished_claim,
        search=300,
    ),
    Regression(
        "reaped-dead-marker-without-dlq",
        201,
        Kind.TERMINAL,
        "A reaper fences an expired lease with no retries left and writes the dead marker, "
        "then dies; the next reaper sees a RUNNING (not DYING) lease beside the marker and only "
        "drops the lease: the job is dead with no dlq/ record, its payload gone.",
        _reaper_finishes_dead_marker_only_for_dying_lease,
        search=600,
    ),
    Regression(
        "retried-enqueue-runs-finished-job",
        62,
        Kind.RAN_AFTER_END,
        "The producer's create-only PUT queue/ lands but its response is lost; a worker claims "
        "and finishes the job; botocore's resend finds the key free and creates the entry again; "
        "a claim that skips the done/ check for first attempts runs the finished job again.",
        _claim_trusts_first_attempt_entries,
        search=300,
    ),
    Regression(
        "stale-entry-resets-attempts",
        1547,
        Kind.RETRY_POLICY,
        "A stale pending entry with fewer attempts (a stalled worker's late retry, or an "
        "enqueue resent while attempt 1 runs) meets requeue's create-only PUT, which keeps it: "
        "earlier attempts run again, and the job runs more than max_retries + 1 times.",
        _requeue_keeps_any_pending_entry,
        search=2000,
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
        search=100,
    ),
    Regression(
        "handler-starts-before-the-delete-answers",
        299,
        Kind.RETRY_POLICY,
        "The claim sends its DELETE of the entry beside the HEAD of done/ (issue 17) but starts "
        "the handler without waiting for the DELETE's answer. The DELETE fails (a 409, then a "
        "5xx, past the client's tries): the entry stays beside the running job, and once the "
        "attempt settles the job runs again from it: attempt 2 twice, past max_retries.",
        _handler_starts_before_the_delete_answers,
        search=1000,
    ),
    Regression(
        "redrive-deletes-a-cancellation",
        1039,
        Kind.RESULT_CHANGED,
        "Dead and cancelled markers are both the bytes null, so both have one ETag: a redrive "
        "whose DELETE done/ is If-Match the dead marker's ETag also deletes a cancelled marker "
        "written in between (issue 18, defect 0).",
        _markers_all_null,
        search=2000,
    ),
    Regression(
        "half-done-redrive-dead-again",
        290,
        Kind.TERMINAL,
        "A redrive stops after writing the new entry (or after deleting the record); the claim "
        "of the redriven entry finds the old dead marker and takes it for the job's end: the job "
        "dies again with no record, or is done with the old record left (issue 12, defect 4).",
        _nobody_clears_a_half_done_redrive,
        search=1000,
    ),
    Regression(
        "late-retry-entry-hides-done",
        72,
        Kind.STATUS,
        "A stalled owner's retry entry lands after another worker finished the job; status "
        "reads queue/ first and says pending for a done job (issue 12, defect 7).",
        _status_reads_the_entry_first,
        search=600,
    ),
    Regression(
        "late-dead-letter-outlives-redrive",
        None,
        Kind.TERMINAL,
        "A dead-letter writer stalls (or its dlq/ PUT is resent late); the reaper finishes the "
        "dead-letter, an operator redrives the job, and the late write re-creates the record "
        "of the death taken back: the job lives on with a dead-letter beside it.",
        _late_dead_letter_keeps_its_record,
        # One seed in 15,000 reaches it (14170, before the dependencies joined the sweep).
        schedule="dead-letter-written-late-into-a-redrive",
    ),
    Regression(
        "late-dead-letter-between-redrive-deletes",
        None,
        Kind.TERMINAL,
        "A reaper stalls inside a dead-letter; another finishes it; a redrive writes the next "
        "life's entry, deletes the record and stalls before deleting the marker; the stalled "
        "reaper lands its record then and crashes; the redrive deletes the marker, so no later "
        "reader meets a stale one and the record of the death taken back stays beside a job "
        "that succeeds (found when the schedules joined the main sweep).",
        _redrive_never_looks_again,
        # No seed of 0-15,500 reaches it under the shipped loop (5451 did with
        # the old copy of the worker loop).
        schedule="dead-letter-written-between-a-redrives-deletes",
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
    Regression(
        "pause-check-failure-walks-its-page",
        105,
        Kind.PAUSE,
        "A refill lists a page, then its HEAD of the pause marker fails (a 5xx past the "
        "client's tries); the page stays in the claimer's cache, and its next claim walks it "
        "with no check at all: it claims while the queue is paused.",
        _pause_check_failure_keeps_the_page,
        family=Family.PAUSING,
        search=300,
    ),
    Regression(
        "cancel-says-cancelled-after-another-end",
        112,
        Kind.CANCEL_LOST,
        "A cancel marks a stale pending entry of a job that already ended (done or dead); its "
        "marker write loses to that outcome, and it returns True anyway: the caller is told "
        "the job is cancelled, and the job ended otherwise.",
        _cancel_says_cancelled_whatever_ended_the_job,
        search=300,
    ),
    Regression(
        "requeue-moves-the-job-to-another-shard",
        41,
        Kind.TWO_SHARDS,
        "After the queue grew, a worker on the grown count requeues a job of the old layout "
        "under the shard its own count names, not the one the job lives in: the job's keys "
        "are in two shards, and readers of one miss the other.",
        _requeue_in_the_workers_own_shard,
        family=Family.SHARDED,
        search=100,
    ),
    Regression(
        "claim-raises-on-foreign-bytes",
        1,
        Kind.ACTOR_DIED,
        "A claim meets an entry it cannot decode (pailq 0.1.1's NaN, a script's bytes) and "
        "lets the error out instead of quarantining it: the worker loop dies on one bad job.",
        _claim_raises_on_foreign_bytes,
        family=Family.HOSTILE,
        search=20,
    ),
    Regression(
        "claim-drops-an-ended-entry-untold",
        7103,
        Kind.DEPENDENCY,
        "A cancel marks a running dependency cancelled and crashes before it tells the "
        "dependent; the owner's attempt fails and writes its retry entry (it carries the "
        "dependent), then removes its lease; the next claim of that entry sees the cancelled "
        "marker and drops entry and lease without telling: no record of the dependency names "
        "the dependent any more, and it waits for ever (found by the main sweep, seed 7103).",
        _claim_drops_an_ended_entry_untold,
    ),
    Regression(
        "keyed-repair-writes-an-entry",
        37,
        Kind.DEPENDENCY,
        "A keyed producer enqueues a job after others (enqueue(key=K, after=[...])) and crashes "
        "between the key record and the waiting record; a repeat with the same key finds no "
        "object of the job and repairs it with a pending entry, as a plain keyed job's repair "
        "does: the job runs before its dependencies succeeded.",
        _keyed_repair_writes_an_entry,
        search=300,
    ),
    Regression(
        "fan-out-writes-the-children-first",
        549,
        Kind.DEPENDENCY,
        "A handler's fan-out writes its children before the continuation's waiting record, "
        "and its worker crashes between the two on the job's last attempt: the children run "
        "with no continuation to tell, which is never written (or, written by a retry after a "
        "child ended, waits for ever).",
        _fan_out_writes_the_children_first,
        search=1500,  # 549 and 1360 of the first 1,500 (a world in 40 has fan-outs)
    ),
    Regression(
        "reaper-leaves-expired-leases",
        0,
        Kind.STUCK,
        "A worker crashes holding a lease; the reaper lists the expired lease and leaves it: "
        "the job sits in run/ for ever, and claims of it 412 on the lease.",
        _reaper_leaves_expired_leases,
        search=20,
    ),
)
