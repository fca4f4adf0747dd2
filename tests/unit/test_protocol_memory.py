"""The protocol over the in-memory store, with the server's clock in the test's hands.

Fast, deterministic checks of the claim order, the reaper's clock and the
terminal key; the same code runs against the real server in tests/integration.
"""

from __future__ import annotations

import pytest

from pail import JobState, ManualClock, MemoryStore, Pail
from pail.protocol.claim import Claimer
from tests.support.clocks import ServerClock


@pytest.fixture
def server() -> ServerClock:
    return ServerClock()


@pytest.fixture
def store(server: ServerClock) -> MemoryStore:
    return MemoryStore("jobs", now=server)


def test_given_lone_worker_when_claiming_then_jobs_come_oldest_first(store: MemoryStore) -> None:
    pail = Pail(store)
    ids = [pail.enqueue({"i": i}) for i in range(30)]
    order: list[str] = []
    while (message := pail.claim()) is not None:
        order.append(message.id)
        message.complete()
    assert order == sorted(ids)


def test_given_misses_when_claiming_then_spread_widens_and_then_narrows(store: MemoryStore) -> None:
    pail = Pail(store)
    for i in range(200):
        pail.enqueue({"i": i})
    claimer = Claimer(store, pail.keys, visibility_timeout=30, clock=ManualClock(), owner="w")
    assert claimer.claim() is not None and claimer.spread == 1
    rival = Pail(store)
    for _ in range(5):  # another worker takes the jobs next in our page
        message = rival.claim()
        assert message is not None
        message.complete()

    assert claimer.claim() is not None
    assert claimer.spread > 1
    for _ in range(64):
        assert claimer.claim() is not None
    assert claimer.spread == 1


def test_given_expired_lease_by_server_clock_then_reaper_requeues(
    store: MemoryStore, server: ServerClock
) -> None:
    pail = Pail(store, visibility_timeout=10)
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None
    message._heartbeat.stop()  # the worker died

    server.advance(10.5)
    assert pail.reap().expired == 0  # not past timeout + the 1 s resolution of Date
    server.advance(1)
    report = pail.reap()

    assert (report.expired, report.requeued, report.requeued_ids) == (1, 1, [job_id])
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 1


def test_given_success_written_first_when_dead_letter_attempted_then_job_stays_done(
    store: MemoryStore,
) -> None:
    pail = Pail(store, max_retries=0)
    job_id = pail.enqueue({"n": 1})
    (first,) = [pail.claim()]
    assert first is not None
    store.put(pail.keys.done(job_id), b'{"by":"someone"}', if_none_match=True)  # a late zombie

    first.fail(RuntimeError("boom"))

    assert pail.result(job_id) == {"by": "someone"}
    assert pail.dead_letters() == []
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.DONE


def test_given_express_bucket_listing_unordered_then_every_job_still_claimed_once() -> None:
    store = MemoryStore("jobs--use1-az4--x-s3", ordered_listing=False, seed=7)
    pail = Pail(store)
    ids = {pail.enqueue({"i": i}) for i in range(40)}
    seen: list[str] = []
    while (message := pail.claim()) is not None:
        seen.append(message.id)
        message.complete()
    assert sorted(seen) == sorted(ids)
    assert pail.mode.value == "express"
