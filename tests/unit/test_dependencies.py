"""Dependencies on the in-memory store: a fan-out that fails half-way, and the records' codec."""

from __future__ import annotations

from typing import Any

import pytest

from pail import JobState, MemoryStore, Pail, current_job
from pail.codec import Envelope, LeaseRecord
from pail.errors import DecodeError
from pail.keys import Keys, shard_of
from pail.protocol import dependencies
from pail.protocol.dependencies import WaitingJob
from tests.support.hooked_store import HookedStore


def _planner(ran: list[Any]) -> Any:
    def handler(payload: Any) -> Any:
        ran.append(payload)
        job = current_job()
        assert job is not None
        if payload.get("plan"):
            flow = job.fan_out([{"n": n} for n in range(3)], then={"merge": True})
            return {"n": 100, "then": flow.then}
        if payload.get("merge"):
            return sorted(result["n"] for result in job.dependencies.values())
        return {"n": payload["n"]}

    return handler


def test_given_a_fan_out_that_fails_between_its_writes_when_retried_then_the_flow_runs_once() -> (
    None
):
    hooked = HookedStore(MemoryStore("jobs"))
    pail = Pail(hooked, max_retries=2)
    plan = pail.enqueue({"plan": True})

    def fail() -> None:
        raise RuntimeError("the worker's connection broke between two writes")

    # The continuation's record and the first child are written; the second child's PUT fails.
    hooked.before("put", pail.keys.queue(f"{plan}.0.1"), fail)
    ran: list[Any] = []
    while pail.work_once(_planner(ran)):
        pass
    pail.flush()

    then = f"{plan}.0.then"
    assert ran.count({"plan": True}) == 2  # the failed attempt, then its retry
    assert ran.count({"merge": True}) == 1
    assert pail.result(then) == [0, 1, 2, 100]  # the children's results and the parent's
    status = pail.status(then)
    assert status is not None and status.state is JobState.DONE
    assert pail.stats().waiting == 0


def test_given_a_fan_out_parent_that_dies_then_its_continuation_is_dead_lettered() -> None:
    hooked = HookedStore(MemoryStore("jobs"))
    pail = Pail(hooked, max_retries=0)
    plan = pail.enqueue({"plan": True})

    def fail() -> None:
        raise RuntimeError("no retries left")

    hooked.before("put", pail.keys.queue(f"{plan}.0.2"), fail)
    while pail.work_once(_planner([])):
        pass

    status = pail.status(f"{plan}.0.then")
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and plan in status.error.message


def test_given_a_redriven_fan_out_parent_when_it_fans_out_again_then_a_new_flow_runs() -> None:
    # Found by the simulation (the dependency worlds' fan-out parents): the
    # parent fanned out and died, which ended its continuation; redriven, it fanned out again
    # under the same ids, which re-created the ended continuation's waiting record and entries
    # of children that had ended: the record waited for ever beside the continuation's outcome.
    store = MemoryStore("jobs")
    pail = Pail(store, max_retries=0)
    plan = pail.enqueue({"plan": True})
    ran: list[Any] = []
    planner = _planner(ran)
    lives: list[int] = []

    def dies_once(payload: Any) -> Any:
        result = planner(payload)
        if payload.get("plan") and not lives:
            lives.append(1)
            raise RuntimeError("the parent's first life fails after its fan-out")
        return result

    while pail.work_once(dies_once):
        pass
    first = pail.status(f"{plan}.0.then")
    assert first is not None and first.state is JobState.FAILED  # the parent died: it ended
    assert pail.redrive(plan) == [plan]
    while pail.work_once(dies_once):
        pass
    pail.flush()

    then = f"{plan}.r1.0.then"  # life 1's first fan-out: ids of its own
    assert ran.count({"merge": True}) == 1
    assert pail.result(then) == [0, 1, 2, 100]
    assert pail.status(plan) is not None and pail.status(plan).state is JobState.DONE  # type: ignore[union-attr]
    assert [item.key for item in store.list("wait/").items] == []  # nor the first life's


def test_given_a_flow_ended_by_its_child_when_the_parent_retries_then_nothing_waits() -> None:
    # Found by the simulation (there, a child was dead-lettered): a child's end
    # ended the continuation and removed its record; the parent's retry then fanned out
    # again, and its create-only PUT re-created that record, which nothing would end.
    store = MemoryStore("jobs")
    pail = Pail(store, max_retries=1)
    plan = pail.enqueue({"plan": True})
    attempts: list[int] = []

    def parent(payload: Any) -> Any:
        job = current_job()
        assert job is not None
        job.fan_out([{"n": 0}], then={"merge": True})
        attempts.append(job.message.attempt)
        if len(attempts) == 1:
            raise RuntimeError("the parent's first attempt fails after its fan-out")
        return "planned"

    assert pail.work_once(parent)  # the fan-out written; the parent is to be retried
    assert pail.cancel(f"{plan}.0.0")  # the child ends: so does its continuation
    assert pail.work_once(parent)  # the retry fans out again, and succeeds
    pail.flush()

    assert attempts == [1, 2]
    then = pail.status(f"{plan}.0.then")
    assert then is not None and then.state is JobState.CANCELLED
    # The retry wrote neither the ended continuation's record nor its child's entry again.
    assert [item.key for item in store.list("wait/").items] == []
    assert [item.key for item in store.list("queue/").items] == []


@pytest.mark.parametrize(
    "edges",
    [{"then": "x"}, {"then": [1]}, {"after": ["a/b"]}, {"then": [""]}, {"after": ["x"] * 1001}],
)
def test_given_foreign_edges_in_an_entry_or_a_lease_then_they_are_a_decode_error(
    edges: dict[str, Any],
) -> None:
    import json

    entry = json.dumps({"payload": 1, "attempts": 0, **edges}).encode()
    lease = json.dumps({"payload": 1, "attempts": 1, "lease": "t", **edges}).encode()

    with pytest.raises(DecodeError):
        Envelope.decode(entry)
    with pytest.raises(DecodeError):
        LeaseRecord.decode(lease, "J")


@pytest.mark.parametrize(
    "body",
    [
        b"NaN",
        b"[]",
        b'{"payload": 1}',
        b'{"payload": 1, "after": []}',
        b'{"payload": 1, "after": ["a"], "on_failure": "explode"}',
        b'{"payload": 1, "after": ["a"], "id": "other"}',
        b'{"payload": 1, "after": ["a"], "met": "a"}',
    ],
)
def test_given_foreign_bytes_in_a_waiting_record_then_they_are_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        WaitingJob.decode(body, "J")


def test_given_a_waiting_record_then_it_round_trips_and_is_ready_once_all_are_met() -> None:
    record = WaitingJob("J", {"x": 1}, ("a", "b"), then=("c",), late=("b",))

    again = WaitingJob.decode(record.encode(), "J")

    assert again == record
    assert not again.ready and again.meeting("a").meeting("b").ready


def test_given_a_sharded_namespaced_queue_then_flows_chains_and_late_edges_run_in_order() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store, queue="reports", shards=4)
    other = Pail(store)  # the default queue of the same bucket sees none of it
    flow = pail.enqueue_flow([{"n": n} for n in range(5)], then={"merge": "flow"})
    chain = pail.enqueue_chain([{"n": 10}, {"n": 11}])
    first = pail.enqueue({"n": 20})
    late = pail.enqueue({"merge": "late"}, after=[first, chain[-1]])
    ran: list[Any] = []

    while pail.work_once(_planner(ran)):
        pail.flush()
        pail.reap()  # the late edge's look (the deployed reaper runs every minute)

    assert pail.result(flow.then) == [0, 1, 2, 3, 4]
    assert pail.result(late) == [11, 20]
    assert ran.index({"n": 10}) < ran.index({"n": 11}) < ran.index({"merge": "late"})
    assert ran.index({"n": 20}) < ran.index({"merge": "late"})
    assert max(ran.index({"n": n}) for n in range(5)) < ran.index({"merge": "flow"})
    assert other.stats() == (0, 0, 0, 0, None) and other.stats().waiting == 0
    assert pail.stats().waiting == 0 and pail.stats().done == 10
    assert {store_key.split("/")[1] for store_key in _keys(store)} <= {
        "queue",
        "run",
        "done",
        "_pail",
    }


def _keys(store: MemoryStore) -> list[str]:
    return [item.key for item in store.list("reports/").items]


def test_given_a_finisher_on_an_older_shard_count_then_it_finds_the_record_by_the_layout_marker() -> (
    None
):
    store = MemoryStore("jobs")
    grown = Pail(
        store, shards=8
    )  # a producer the rollout of 8 shards reached: it writes the marker
    old = Keys(shards=2)  # a worker still given 2 shards
    for _ in range(64):  # a continuation outside the shards both counts share (3 in 4 are)
        flow = grown.enqueue_flow([{"n": 1}], then={"merge": True})
        if shard_of(flow.then, 8) >= 2:
            break
    assert shard_of(flow.then, 8) >= 2
    assert not any(
        store.get(k.wait(flow.then)) for k in dependencies.unpinned(old).layouts(flow.then)
    )

    found = dependencies.find(store, old, flow.then)

    assert found is not None
    layout, record = found
    assert record.key == grown.keys.wait(flow.then) == layout.wait(flow.then)


def test_given_a_shard_rollout_between_two_attempts_when_the_parent_fans_out_again_then_no_child_is_written_twice() -> (
    None
):
    store = MemoryStore("jobs")
    before = Pail(store, shards=2, reclaim=False)  # the count of the parent's first attempt
    parent = before.enqueue({"plan": True})
    first = before.claim()
    assert first is not None and first.id == parent
    flow = first.fan_out([{"n": n} for n in range(8)], then={"merge": True})
    assert first.fail("the first attempt fails after its fan-out")
    after = Pail(store, shards=4, reclaim=False)  # the rollout grew the worker's count
    while (message := after.claim()) is not None and message.id != parent:
        pass  # a child, claimed and left running
    assert message is not None

    again = message.fan_out([{"n": n} for n in range(8)], then={"merge": True})

    assert again == flow  # the same ids on every attempt ...
    stored = list(store.keys())
    for job in (*flow.children, flow.then):  # ... and the same shard: one job, never two
        # (a claimed child's entry written again beside its lease is the stale entry its
        # next claim drops; an entry in another shard would be a second job)
        shards = {key.split("/")[1] for key in stored if key.endswith(f"/{job}")}
        assert len(shards) == 1, (job, shards)
