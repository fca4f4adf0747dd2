"""Release (``Message.release``) over the in-memory store: what it records, and every crash in it.

A release before the handler started gives the attempt back; after it, the
attempt counts. Neither waits out a retry backoff. A crash after each step
leaves something the reaper finishes the same way.
"""

from __future__ import annotations

import pytest

from pail import JobState, MemoryStore, Pail, RetryPolicy
from pail.codec import RETRYING, LeaseRecord
from tests.support.clocks import ServerClock
from tests.support.hooked_store import HookedStore, SimulatedCrash

TIMEOUT = 30.0


@pytest.fixture
def server() -> ServerClock:
    return ServerClock()


def queue_on(store: MemoryStore | HookedStore, **options: object) -> Pail:
    return Pail(store, visibility_timeout=TIMEOUT, **options)  # type: ignore[arg-type]


def crash_before(store: HookedStore, operation: str, prefix: str) -> None:
    def crash() -> None:
        raise SimulatedCrash(f"crash before {operation} {prefix}")

    store.before(operation, prefix, crash)


@pytest.mark.parametrize("started", [False, True], ids=["unstarted", "started"])
def test_given_a_backoff_policy_when_released_then_the_job_is_claimable_at_once(
    server: ServerClock, started: bool
) -> None:
    queue = queue_on(MemoryStore(now=server), retry_policy=RetryPolicy.fixed(3600))
    job_id = queue.enqueue({"n": 1})
    message = queue.claim()
    assert message is not None

    message.release("the worker must stop", started=started)

    again = queue.claim()
    assert again is not None and again.id == job_id
    assert again.attempt == (2 if started else 1)


def test_given_a_job_retried_once_when_released_unstarted_then_it_keeps_its_attempts_and_error(
    server: ServerClock,
) -> None:
    queue = queue_on(MemoryStore(now=server))
    job_id = queue.enqueue({"n": 1})
    first = queue.claim()
    assert first is not None
    first.fail(ValueError("first attempt broke"))
    second = queue.claim()
    assert second is not None and second.attempt == 2

    second.release("claimed too late to start", started=False)

    status = queue.status(job_id)
    assert status is not None
    assert (status.state, status.attempts) == (JobState.PENDING, 1)
    assert status.error is not None and status.error.message == "first attempt broke"


def test_given_no_retries_left_when_released_then_started_dead_letters_and_unstarted_does_not(
    server: ServerClock,
) -> None:
    queue = queue_on(MemoryStore(now=server), max_retries=0)
    kept, dead = queue.enqueue({"n": 1}), queue.enqueue({"n": 2})
    for job_id, started in ((kept, False), (dead, True)):
        message = queue.claim()
        assert message is not None and message.id == job_id
        message.release("the worker must stop", started=started)

    kept_status, dead_status = queue.status(kept), queue.status(dead)
    assert kept_status is not None and kept_status.state is JobState.PENDING
    assert dead_status is not None and dead_status.state is JobState.FAILED


@pytest.mark.parametrize(
    ("operation", "prefix"),
    [("put", "queue/"), ("delete", "run/")],
    ids=["after the decision", "after the pending entry"],
)
def test_given_a_crash_during_an_unstarted_release_when_reaped_then_no_attempt_is_spent(
    server: ServerClock, operation: str, prefix: str
) -> None:
    memory = MemoryStore(now=server)
    producer = queue_on(memory, max_retries=0)
    job_id = producer.enqueue({"n": 1})
    hooked = HookedStore(memory)
    worker = queue_on(hooked, max_retries=0)
    message = worker.claim()
    assert message is not None
    crash_before(hooked, operation, prefix)

    with pytest.raises(SimulatedCrash):
        message.release("claimed too late to start", started=False)

    lease = memory.get(producer.keys.run(job_id))
    assert lease is not None
    record = LeaseRecord.decode(lease.body, job_id)
    assert (record.state, record.uncounted, record.attempts_used) == (RETRYING, True, 0)
    status = producer.status(job_id)
    assert status is not None and (status.state, status.attempts) == (JobState.PENDING, 0)

    server.advance(TIMEOUT + 2)
    producer.reap()

    assert memory.get(producer.keys.run(job_id)) is None
    again = producer.claim()  # max_retries=0: only an unspent attempt can still run
    assert again is not None and (again.id, again.attempt) == (job_id, 1)
    assert again.complete({"ran": True})
    assert producer.result(job_id) == {"ran": True}
