"""Dedup keys with ``after=``: the key names a waiting job, and its repair writes ``wait/``, never an entry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pail import ConfigurationError, JobState, MemoryStore, Pail
from pail.errors import DecodeError
from pail.keys import QUEUE, WAIT, Keys, shard_of
from pail.protocol import dedup
from pail.protocol.dedup import EnqueueResult, decode_record
from pail.store.counting import CountingStore
from tests.support.hooked_store import HookedStore, SimulatedCrash

OTHER = "01J0000000000000000000000B"


def _crash() -> None:
    raise SimulatedCrash


def _drain(pail: Pail, ran: list[Any]) -> None:
    """Work every claimable job; the reaper's pass after each (the late edge's look)."""

    def handler(payload: Any) -> Any:
        ran.append(payload)
        return payload

    while True:
        worked = pail.work_once(handler)
        pail.flush()
        pail.reap()
        if not worked and pail.stats().pending == 0:
            return


def test_given_a_producer_crashed_between_key_record_and_wait_record_when_repeated_then_one_job_waits_and_runs_after_once() -> (
    None
):
    store = MemoryStore("jobs")
    pail = Pail(store)
    first = pail.enqueue({"step": "export"})
    hooked = HookedStore(store)
    hooked.before("put", pail.keys.prefix(WAIT), _crash)
    with pytest.raises(SimulatedCrash):
        Pail(hooked).enqueue({"step": "merge"}, key="merge-1", after=[first])
    assert pail.stats().waiting == 0  # only the key record landed

    repeat = pail.enqueue_once({"step": "other"}, key="merge-1", after=[first])

    assert not repeat.created
    status = pail.status(repeat.id)
    assert status is not None and status.state is JobState.WAITING
    assert status.waiting_for == (first,)
    assert store.head(pail.keys.queue(repeat.id)) is None  # no entry beside the waiting record
    assert pail.enqueue({"step": "again"}, key="merge-1", after=[first]) == repeat.id
    assert pail.stats().waiting == 1
    ran: list[Any] = []
    _drain(pail, ran)
    assert ran == [{"step": "export"}, {"step": "merge"}]  # the first producer's payload, after
    assert pail.result(repeat.id) == {"step": "merge"}
    assert pail.stats().waiting == 0 and pail.stats().done == 2


def test_given_a_keyed_waiting_job_when_repeated_at_each_state_then_nothing_more_is_written() -> (
    None
):
    store = MemoryStore("jobs")
    pail = Pail(store)
    first = pail.enqueue({"n": 1})
    job = pail.enqueue_once({"n": 2}, key="k", after=[first])
    ran: list[Any] = []

    def repeat() -> EnqueueResult:
        before = sorted(store.keys())
        again = pail.enqueue_once({"n": 3}, key="k", after=[first])
        assert sorted(store.keys()) == before, "a repeat of a job that exists wrote something"
        return again

    assert job.created and repeat() == EnqueueResult(job.id, created=False)  # waiting
    assert pail.work_once(lambda payload: ran.append(payload))
    pail.flush()
    pail.reap()
    assert pail.status(job.id).state is JobState.PENDING  # type: ignore[union-attr]
    assert repeat().id == job.id  # promoted: pending
    _drain(pail, ran)
    assert repeat().id == job.id  # done
    assert ran == [{"n": 1}, {"n": 2}]


def test_given_a_repeat_that_races_the_promotion_then_it_finds_the_job_between_wait_and_queue() -> (
    None
):
    # The repeat's HEAD of wait/ misses (the promotion deleted it just before), so the
    # promotion's entry must already be there: wait/ is looked at before queue/.
    store = MemoryStore("jobs")
    pail = Pail(store)
    first = pail.enqueue({"n": 1})
    job = pail.enqueue_once({"n": 2}, key="k", after=[first])
    assert pail.work_once(lambda payload: None)
    pail.flush()
    hooked = HookedStore(store)
    promoting = Pail(store)

    def promote() -> None:
        promoting.reap()

    hooked.before("head", pail.keys.wait(job.id), promote)

    again = Pail(hooked).enqueue_once({"n": 3}, key="k", after=[first])

    assert again == EnqueueResult(job.id, created=False)
    assert pail.stats().waiting == 0 and pail.stats().pending == 1
    ran: list[Any] = []
    _drain(pail, ran)
    assert ran == [{"n": 2}]


def test_given_a_keyed_enqueue_after_then_its_requests_are_counted() -> None:
    store = MemoryStore("jobs")
    counting = CountingStore(store)
    pail = Pail(counting)
    first = pail.enqueue({"n": 1})
    counting.requests.clear()

    pail.enqueue({"n": 2}, key="k", after=[first])
    made = dict(counting.requests)
    counting.requests.clear()
    pail.enqueue({"n": 2}, key="k", after=[first])
    repeat = dict(counting.requests)

    # PUT key record, PUT wait/, HEAD done/ of the dependency (the late look).
    assert made == {"PutObject": 2, "HeadObject": 1}, made
    # PUT key record (412), GET it, HEAD wait/ (the job is waiting: found at once).
    assert repeat == {"PutObject": 1, "GetObject": 1, "HeadObject": 1}, repeat


def test_given_a_sharded_namespaced_queue_then_the_keyed_waiting_job_lives_in_its_shard() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store, queue="reports", shards=4)
    first = pail.enqueue({"n": 1})
    hooked = HookedStore(store)
    hooked.before("put", pail.keys.prefix(WAIT), _crash)
    with pytest.raises(SimulatedCrash):
        Pail(hooked, queue="reports", shards=4).enqueue({"n": 2}, key="k", after=[first])

    job = pail.enqueue({"n": 3}, key="k", after=[first])

    listed = store.keys()
    assert [key for key in listed if f"/{WAIT}" in key] == [
        f"reports/{WAIT}{shard_of(job, 4):x}/{job}"  # the job's shard, as put_waiting writes it
    ], listed
    assert Pail(store).enqueue({"n": 4}, key="k", after=[first]) != job  # its own keys/
    ran: list[Any] = []
    _drain(pail, ran)
    assert ran == [{"n": 1}, {"n": 2}]


def test_given_a_key_with_after_and_a_delay_or_then_alone_then_refused_and_nothing_written() -> (
    None
):
    store = MemoryStore("jobs")
    pail = Pail(store)
    first = pail.enqueue({"n": 1})
    before = sorted(store.keys())

    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 2}, key="k", after=[first], delay=5)
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 2}, key="k", then=[OTHER])
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 2}, key="k", after=[])

    assert sorted(store.keys()) == before


def _record(**changes: Any) -> bytes:
    data: dict[str, Any] = {
        "id": "01J0000000000000000000000A",
        "key": "k",
        "waiting": {"payload": 1, "attempts": 0, "after": [OTHER], "w": "t"},
        "on_failure": "dead-letter",
        "w": "t",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


@pytest.mark.parametrize(
    "body",
    [
        _record(on_failure="explode"),
        _record(waiting={"payload": 1, "after": []}),
        _record(waiting={"payload": 1, "after": ["01J0000000000000000000000A"]}),
        _record(waiting={"payload": 1, "after": "x"}),
        _record(waiting={"payload": 1, "after": [OTHER], "then": [7]}),
        _record(due="2026-01-01T00:00:00+00:00"),
        _record(envelope={"payload": 1}),  # both places
        _record(waiting=None, envelope={"payload": 1, "after": [OTHER]}),  # edges, no "waiting"
        _record(waiting=None, envelope={"payload": 1}, on_failure="cancel"),
        _record(waiting=[1]),
    ],
    ids=str,
)
def test_given_foreign_bytes_in_a_key_record_with_edges_then_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError, match="dedup key record is unreadable"):
        decode_record(body)


def test_given_foreign_edges_in_the_key_record_when_repeated_then_a_decode_error_and_nothing_written() -> (
    None
):
    store = MemoryStore("jobs")
    keys = Keys()
    store.put(keys.dedup(dedup.digest("k")), _record(on_failure="explode"))
    before = sorted(store.keys())

    with pytest.raises(DecodeError):
        Pail(store).enqueue({"n": 1}, key="k", after=[OTHER])

    listed = store.keys()
    assert sorted(listed) == before
    assert not [key for key in listed if key.startswith(QUEUE)]


def test_given_a_waiting_record_then_it_round_trips_its_edges() -> None:
    record = decode_record(_record(waiting={"payload": 1, "after": [OTHER], "then": [OTHER]}))

    assert record.waits and record.envelope.after == (OTHER,)
    assert record.envelope.then == (OTHER,) and record.on_failure == "dead-letter"
    assert record.due is None
