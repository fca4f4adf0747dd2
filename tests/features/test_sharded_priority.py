"""A high-priority job goes first in a sharded queue too (issue 23, item 9).

A claimer lists one source (the flat layout or a shard) per refill, starting
at a random one, so a high-priority entry in its job's shard was seen only
when the rotation reached that shard: a fresh worker's first ``work_once``
often ran a normal job first. High-priority entries of a sharded queue now
wait in one place (the flat layout's ``queue/!0000000000000-{id}``) that the
first refill of every claim lists too, beside its own page.
"""

from __future__ import annotations

from typing import Any

from pail import JobState, MemoryStore, Pail
from pail.clock import ManualClock
from pail.keys import shard_of
from pail.protocol.claim import PRIORITY_LOOK_EVERY, Claimer
from pail.store.counting import CountingStore
from tests.support.counting import RequestCounter

FRESH_WORKERS = 24
"""Fresh workers, each starting its rotation at a random source: before the fix, most ran a normal job."""


def test_given_three_normal_jobs_then_a_high_one_when_any_fresh_worker_claims_then_it_runs_the_high_one() -> (
    None
):
    wrong: list[str] = []
    for trial in range(FRESH_WORKERS):
        store = MemoryStore("jobs")
        producer = Pail(store, shards=4)
        for n in range(3):
            producer.enqueue({"n": n})
        urgent = producer.enqueue({"urgent": trial}, priority="high")
        ran: list[Any] = []

        assert Pail(store, shards=4).work_once(ran.append) is True

        if ran != [{"urgent": trial}]:
            wrong.append(
                f"trial {trial}: ran {ran} first (high job in shard {shard_of(urgent, 4)})"
            )
    assert wrong == []


def test_given_a_high_job_in_a_sharded_queue_then_it_waits_in_the_flat_layout_and_lives_there() -> (
    None
):
    store = MemoryStore("jobs")
    pail = Pail(store, shards=4)
    urgent = pail.enqueue({"urgent": True}, priority="high")

    assert [k for k in MemoryStore.keys(store) if k.startswith("queue/")] == [
        f"queue/!0000000000000-{urgent}"
    ]
    status = pail.status(urgent)
    assert status is not None and status.state is JobState.PENDING
    message = pail.claim()
    assert message is not None and message.id == urgent
    assert MemoryStore.keys(store).count(f"run/{urgent}") == 1  # promoted beside its entry: flat
    message.complete("done")
    assert pail.result(urgent) == "done"
    assert pail.status(urgent) is not None


def test_given_a_high_job_in_a_sharded_queue_when_cancelled_then_it_never_runs() -> None:
    pail = Pail(MemoryStore("jobs"), shards=4)
    urgent = pail.enqueue({"urgent": True}, priority="high")
    pail.enqueue({"n": 1})

    assert pail.cancel(urgent) is True

    ran: list[Any] = []
    while pail.work_once(ran.append):
        pass
    assert ran == [{"n": 1}]
    status = pail.status(urgent)
    assert status is not None and status.state is JobState.CANCELLED


def test_given_a_backlog_of_normal_jobs_in_a_sharded_queue_then_the_priority_look_costs_one_list_per_refill_not_per_claim() -> (
    None
):
    store = CountingStore(MemoryStore("jobs"))
    pail = Pail(store, shards=4)
    for n in range(400):
        pail.enqueue({"n": n})
    before = store.requests["ListObjectsV2"]

    processed = 0
    while pail.work_once(lambda payload: None):
        processed += 1

    # 5 sources, ~100 jobs in each shard (one page each): one refill per source
    # and the empty round at the end, each with at most one look at the
    # priority place beside it. Per claim: 400 claims, under 0.1 LIST each.
    assert processed == 400
    assert store.requests["ListObjectsV2"] - before <= 2 * (5 + 5 + 1)


def test_given_an_idle_sharded_queue_when_polling_then_a_poll_still_costs_one_list() -> None:
    pail = Pail(MemoryStore("jobs"), shards=16)
    claimer = Claimer(pail.store, pail.keys, visibility_timeout=30, clock=pail.clock, owner="w")
    assert claimer.claim(polling=True) is None
    before = claimer.lists
    for _ in range(40):
        assert claimer.claim(polling=True) is None
    assert claimer.lists - before == 40


def test_given_a_worker_that_looked_within_the_second_when_a_high_job_arrives_then_its_first_claim_after_the_second_runs_it() -> (
    None
):
    # The bound of the throttle: a claimer looks at the priority place at most
    # once per PRIORITY_LOOK_EVERY, so a high job enqueued just after a look
    # waits at most that long (or the claimer's next refill after it).
    clock = ManualClock()
    store = MemoryStore("jobs")
    pail = Pail(store, shards=4, clock=clock)
    backlog = [pail.enqueue({"n": n}) for n in range(40)]
    largest_shard = max(sum(shard_of(j, 4) == s for j in backlog) for s in range(4))
    worker = Pail(store, shards=4, clock=clock)
    assert worker.work_once(lambda payload: None) is True  # looked: nothing there
    urgent = pail.enqueue({"urgent": True}, priority="high")
    clock.advance(PRIORITY_LOOK_EVERY)
    ran: list[Any] = []
    while not ran or ran[-1] != {"urgent": True}:
        assert worker.work_once(ran.append) is True
        assert len(ran) <= 40, "the high job waited behind the whole backlog"
    status = pail.status(urgent)
    assert status is not None and status.state is JobState.DONE
    # It went first at the worker's next refill: after at most the rest of its page.
    assert len(ran) <= 1 + largest_shard


def test_given_a_sharded_queue_on_s3_when_a_fresh_worker_works_then_the_high_job_goes_first(
    connect: Any, counter: RequestCounter
) -> None:
    pail = connect(shards=4)
    for n in range(3):
        pail.enqueue({"n": n})
    urgent = pail.enqueue({"urgent": True}, priority="high")
    worker = connect(shards=4)
    lists = counter.total("ListObjectsV2")
    ran: list[Any] = []

    while worker.work_once(ran.append):
        pass

    assert ran[0] == {"urgent": True} and len(ran) == 4
    assert pail.result(urgent) == {}
    # Four claims and the empty one: one look at the priority place per claim
    # that refilled, at most (the throttle is a second; a loaded run looks less).
    assert counter.total("ListObjectsV2") - lists <= 5 * (5 + 1)
