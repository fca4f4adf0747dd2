"""The protocol's hard cases, each pinned to one interleaving, on the real local server.

Each test names the window it closes: the stale-listing double run and the
stuck queue+run pair that pailq 0.1.1 has, zombies after a stall, crashes
between steps, and ambiguous outcomes of conditional writes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pail import JobState, ManualClock, Message, Pail
from pail.codec import Envelope
from pail.errors import ConditionFailedError
from pail.local import LocalS3
from pail.protocol.writes import put_conditional
from pail.store import S3Store
from tests.support.hooked_store import HookedStore, SimulatedCrash
from tests.support.queues import store_on
from tests.support.waiting import wait_until

VT = 1.0  # visibility timeout: leases expire (by the server's clock) ~2 s after their last write


@pytest.fixture
def s3store(s3_server: LocalS3, bucket: str) -> Callable[[], S3Store]:
    return functools.partial(store_on, s3_server.connect_kwargs(), bucket)


@pytest.fixture
def hooked(s3store: Callable[[], S3Store]) -> HookedStore:
    return HookedStore(s3store())


class Executions:
    """A handler that records every execution of every job."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, Any]] = []

    def handler(self, name: str) -> Callable[[Any], Any]:
        def run(payload: Any) -> Any:
            self.runs.append((name, payload))
            return {"by": name}

        return run


def reap_until(pail: Pail, field: str) -> None:
    # The server's clock has to move for leases to expire.
    wait_until(lambda: getattr(pail.reap(), field) > 0, timeout=15, what=f"a reap with {field}")


def no_leftovers(pail: Pail) -> Iterator[str]:
    """Yield every job id that has both a pending entry and a lease: the stuck state."""
    pending = {pail.keys.job_id(i.key) for i in pail.store.list(pail.keys.prefix("queue/")).items}
    running = {pail.keys.job_id(i.key) for i in pail.store.list(pail.keys.prefix("run/")).items}
    yield from pending & running


def claim_and_stop_renewing(pail: Pail) -> tuple[str, Message]:
    """Enqueue a job and claim it, then stop its heartbeat: the worker died or stalled."""
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None and message.id == job_id
    message._heartbeat.stop()
    return job_id, message


def take_over(stalled: Pail, other: Pail) -> tuple[str, Message, Message]:
    """A job whose first worker stalled past its lease, reaped and claimed again by ``other``."""
    job_id, zombie = claim_and_stop_renewing(stalled)
    reap_until(other, "requeued")
    owner = other.claim()
    assert owner is not None and owner.id == job_id and owner.attempt == 2
    return job_id, zombie, owner


def test_given_stale_listing_when_job_finished_meanwhile_then_it_does_not_run_again(
    hooked: HookedStore, s3store: Callable[[], S3Store]
) -> None:
    a, b = Pail(hooked, visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    executions = Executions()
    job_id = a.enqueue({"n": 1})

    # A has read queue/{id}; before its create of run/{id}, B claims, runs and
    # finishes the job, deleting run/{id}. pailq 0.1.1's A would now win run/{id}.
    def b_takes_the_job() -> None:
        assert b.work_once(executions.handler("b"))
        b.flush()  # and its lease is gone: A's create-only write would win it

    hooked.before("put", a.keys.run(""), b_takes_the_job)

    assert a.work_once(executions.handler("a")) is False

    assert executions.runs == [("b", {"n": 1})]
    assert a.result(job_id) == {"by": "b"}
    assert a.store.head(a.keys.run(job_id)) is None


def test_given_claim_crashed_between_lease_and_dequeue_then_reaper_unsticks_job(
    hooked: HookedStore, s3store: Callable[[], S3Store]
) -> None:
    a, b = Pail(hooked, visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    job_id = a.enqueue({"n": 1})

    def crash() -> None:
        raise SimulatedCrash

    hooked.before("delete", a.keys.queue(""), crash)
    with pytest.raises(SimulatedCrash):
        a.claim()
    assert list(no_leftovers(b)) == [job_id]  # pailq 0.1.1 stays like this forever
    assert b.claim() is None  # the dead claimer's lease is still valid

    # The claimer may only be stalled, not dead: the reaper takes the entry
    # itself (its If-Match on the ETag the claim read), then ends the attempt.
    reap_until(b, "requeued")

    assert list(no_leftovers(b)) == []
    message = b.claim()
    assert message is not None and message.id == job_id and message.attempt == 2
    message.complete({"ok": True})
    assert b.result(job_id) == {"ok": True}


def test_given_worker_killed_mid_job_when_reaped_then_requeued_and_retried(
    s3store: Callable[[], S3Store],
) -> None:
    a, b = Pail(s3store(), visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    job_id, _ = claim_and_stop_renewing(a)  # the process died: nothing renews the lease

    reap_until(b, "requeued")

    status = b.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 1
    assert status.error is not None and status.error.type == "LeaseExpired"
    assert b.work_once(lambda p: {"second": True}) is True
    assert b.result(job_id) == {"second": True}


def test_given_last_attempt_killed_when_reaped_then_dead_lettered(
    s3store: Callable[[], S3Store],
) -> None:
    a = Pail(s3store(), visibility_timeout=VT, max_retries=0)
    job_id, _ = claim_and_stop_renewing(a)

    reap_until(a, "dead_lettered")

    status = a.status(job_id)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == "LeaseExpired"
    assert a.result(job_id) is None


def test_given_stalled_worker_when_it_wakes_after_takeover_then_it_cannot_settle(
    s3store: Callable[[], S3Store],
) -> None:
    a, b = Pail(s3store(), visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    job_id, zombie, owner = take_over(a, b)  # a stalled: a long GC pause, a frozen VM

    assert zombie.complete({"by": "zombie"}) is False  # its fenced renewal fails first
    assert zombie.lease_lost

    assert b.store.head(b.keys.run(job_id)) is not None  # the new owner's lease is intact
    assert owner.complete({"by": "owner"}) is True
    assert b.result(job_id) == {"by": "owner"}


def test_given_zombie_that_believes_its_lease_is_fresh_then_it_cannot_delete_new_lease_or_overwrite(
    s3_server: LocalS3, bucket: str, s3store: Callable[[], S3Store]
) -> None:
    frozen = ManualClock()  # the zombie's local clock did not move during its stall
    a = Pail(s3store(), visibility_timeout=VT, clock=frozen)
    b = Pail(s3store(), visibility_timeout=VT)
    job_id, zombie, owner = take_over(a, b)

    # The zombie skips renewing (its clock says the lease is fresh) and writes
    # done/{id} first: a success that ran, so it stands, and cannot change.
    assert zombie.complete({"by": "zombie"}) is True
    assert b.store.head(b.keys.run(job_id)) is not None  # its If-Match delete missed the new lease
    assert owner.complete({"by": "owner"}) is False
    assert a.flush() and b.flush()  # the lease removals complete() leaves in flight
    assert b.result(job_id) == {"by": "zombie"}
    assert b.store.head(b.keys.run(job_id)) is None
    assert list(no_leftovers(b)) == []


def test_given_zombie_that_fails_late_then_no_second_pending_entry(
    s3store: Callable[[], S3Store],
) -> None:
    a, b = Pail(s3store(), visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    job_id, zombie, owner = take_over(a, b)

    assert zombie.fail(RuntimeError("late")) is None  # fenced: the lease is not its own

    assert b.store.head(b.keys.queue(job_id)) is None
    assert owner.complete({"ok": 1}) is True


def renewed(message: Message, etag: str) -> Callable[[], bool]:
    """True once ``message``'s lease was rewritten since it had ``etag`` (or was lost)."""
    return lambda: message.lease.etag != etag or message.lease_lost


def test_given_heartbeating_worker_when_reaper_runs_past_the_timeout_then_lease_is_kept(
    s3store: Callable[[], S3Store],
) -> None:
    a, b = Pail(s3store(), visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    job_id = a.enqueue({"n": 1})
    message = a.claim()
    assert message is not None
    run_key = b.keys.run(job_id)
    claimed = b.store.head(run_key)
    assert claimed is not None

    # A reaper pass after each renewal the heartbeat makes, until the lease has lived (by the
    # server's clock) past the point where an unrenewed one is expired: VT plus the 1 s
    # resolution of Date, plus 1 s for the resolution of LastModified. The renewals keep
    # it, however slowly a loaded machine runs them; no race against a fixed loop.
    renewals, lived = 0, 0.0
    while lived <= VT + 2:
        wait_until(
            renewed(message, message.lease.etag),
            timeout=30,
            what=f"renewal {renewals + 1} by the heartbeat",
        )
        assert not message.lease_lost
        renewals += 1
        report = b.reap()
        assert report.expired == 0, f"a lease renewed {renewals} times was reaped"
        now = b.store.head(run_key)
        assert now is not None
        lived = (now.last_modified - claimed.last_modified).total_seconds()

    assert message.complete({"ok": True}) is True
    assert b.result(job_id) == {"ok": True}


def test_given_released_message_then_claimable_at_once_with_release_recorded(
    s3store: Callable[[], S3Store],
) -> None:
    a = Pail(s3store(), visibility_timeout=30)
    job_id = a.enqueue({"n": 1})
    message = a.claim()
    assert message is not None

    message.release("lambda about to time out")

    status = a.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert status.error is not None and status.error.type == "LeaseReleased"
    again = a.claim()
    assert again is not None and again.id == job_id and again.attempt == 2
    again.complete()


def test_given_resent_create_that_fails_412_then_writer_tells_its_own_write_from_another(
    hooked: HookedStore,
) -> None:
    envelope = Envelope(payload={"n": 1})
    key = "queue/01JD8X3W5K9T2B7Q4R6M0N1P2S"
    inner_put = hooked._inner.put

    def resent(key: str, body: bytes, **kwargs: Any) -> Any:
        try:
            return inner_put(key, body, **kwargs)
        except ConditionFailedError as exc:  # as S3Store reports a botocore resend
            raise ConditionFailedError(key, retried=True) from exc

    inner_put(key, envelope.encode(), if_none_match=True, metadata={"pail-write": envelope.write})
    hooked._inner.put = resent  # type: ignore[method-assign]

    won = put_conditional(hooked, key, envelope.encode(), envelope.write, if_none_match=True)
    lost = put_conditional(hooked, key, b'{"payload":2}', "someone-else", if_none_match=True)

    assert won is not None and won.retried and lost is None


def test_given_create_sent_once_that_fails_412_then_it_lost_without_reading_back(
    s3store: Callable[[], S3Store],
) -> None:
    store = s3store()
    key = "queue/01JD8X3W5K9T2B7Q4R6M0N1P2S"
    store.put(key, b"{}", if_none_match=True, metadata={"pail-write": "first"})
    reads: list[str] = []
    store.head = lambda k: reads.append(k)  # type: ignore[assignment, method-assign]

    assert put_conditional(store, key, b"{}", "first", if_none_match=True) is None
    assert reads == []


def test_given_lease_write_applied_but_answer_lost_when_claiming_then_claim_succeeds(
    hooked: HookedStore,
) -> None:
    pail = Pail(hooked, visibility_timeout=30)
    job_id = pail.enqueue({"n": 1})
    inner_put = hooked._inner.put

    def applied_then_lost(key: str, body: bytes, **kwargs: Any) -> Any:
        inner_put(key, body, **kwargs)  # the write lands...
        raise ConditionFailedError(key)  # ...and the retry of it comes back 412

    hooked._inner.put = applied_then_lost  # type: ignore[method-assign]
    try:
        message = pail.claim()
    finally:
        hooked._inner.put = inner_put  # type: ignore[method-assign]

    assert message is not None and message.id == job_id
    assert message.complete({"ok": 1}) is True
    assert pail.write_stats.ambiguous_wins == 1


def test_given_claimed_message_dropped_unsettled_then_its_lease_expires_and_job_is_requeued(
    s3store: Callable[[], S3Store],
) -> None:
    import gc

    a = Pail(s3store(), visibility_timeout=VT)
    job_id = a.enqueue({"n": 1})
    message = a.claim()
    assert message is not None
    del message  # user code raised between claim() and settling, and dropped it
    gc.collect()

    reap_until(a, "requeued")

    status = a.status(job_id)
    assert status is not None and status.state is JobState.PENDING
