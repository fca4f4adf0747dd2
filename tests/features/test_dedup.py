"""Dedup keys: at most one job per key, crash-safe between the key record and the entry."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pail import ConfigurationError, JobState, Pail
from pail.protocol.dedup import EnqueueResult, digest
from tests.support.counting import RequestCounter
from tests.support.hooked_store import HookedStore, SimulatedCrash


def test_given_key_when_enqueued_twice_then_one_job_and_the_repeat_says_so(
    pail: Pail, counter: RequestCounter
) -> None:
    first = pail.enqueue_once({"order": 42}, key="order-42")
    after_first = counter.total()
    second = pail.enqueue_once({"order": 42, "again": True}, key="order-42")

    assert first.created and not second.created
    assert second == EnqueueResult(first.id, created=False)
    assert after_first == 3  # GET layout marker (once per Pail), PUT key record, PUT entry
    assert counter.total() - after_first == 3  # PUT key (412), GET record, HEAD entry
    assert pail.stats().pending == 1
    message = pail.claim()
    assert message is not None and message.payload == {"order": 42}


def test_given_key_when_enqueue_with_key_then_returns_the_same_id(pail: Pail) -> None:
    job_id = pail.enqueue({"order": 42}, key="order-42")

    assert pail.enqueue({"order": 42}, key="order-42") == job_id
    assert pail.enqueue({"order": 43}, key="order-43") != job_id


def test_given_racing_producers_when_same_key_then_exactly_one_creates(
    connect: Callable[..., Pail],
) -> None:
    producers = [connect() for _ in range(8)]
    results: list[EnqueueResult] = []
    lock, start = threading.Lock(), threading.Barrier(len(producers))

    def produce(pail: Pail) -> None:
        start.wait()
        result = pail.enqueue_once({"order": 42}, key="order-42")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=produce, args=(p,)) for p in producers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(r.created for r in results) == 1
    assert len({r.id for r in results}) == 1
    assert producers[0].stats().pending == 1


def test_given_producer_crashed_after_key_record_when_enqueued_again_then_the_job_is_written(
    pail: Pail, hooked: HookedStore
) -> None:
    crashing = Pail(hooked)

    def crash() -> None:
        raise SimulatedCrash

    hooked.before("put", pail.keys.prefix("queue/"), crash)
    with pytest.raises(SimulatedCrash):
        crashing.enqueue_once({"order": 42}, key="order-42")

    repeat = pail.enqueue_once({"order": 99}, key="order-42")

    assert not repeat.created
    status = pail.status(repeat.id)
    assert status is not None and status.state is JobState.PENDING
    message = pail.claim()
    assert message is not None and message.id == repeat.id
    assert message.payload == {"order": 42}  # the first producer's payload, from the record


def test_given_finished_keyed_job_when_its_late_entry_lands_then_it_does_not_run_again(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"order": 42}, key="order-42")
    entry = pail.store.get(pail.keys.queue(job_id))
    assert entry is not None
    pail.work_once(lambda payload: "shipped")
    pail.flush()  # the job has ended and its lease is gone
    # A first producer's step 2, delayed past the repair and the job's end:
    pail.store.put(pail.keys.queue(job_id), entry.body, if_none_match=True)
    runs: list[object] = []

    assert pail.work_once(runs.append) is False
    assert runs == []
    assert pail.result(job_id) == "shipped"
    assert pail.stats().pending == 0


def test_given_forgotten_key_when_enqueued_again_then_a_new_job(pail: Pail) -> None:
    first = pail.enqueue({"order": 42}, key="order-42")
    pail.forget_key("order-42")

    second = pail.enqueue_once({"order": 42}, key="order-42")

    assert second.created and second.id != first


def test_given_namespaces_when_same_key_then_each_queue_has_its_job(
    connect: Callable[..., Pail],
) -> None:
    reports, emails = connect(queue="reports"), connect(queue="emails")

    assert reports.enqueue_once({"n": 1}, key="k").created
    assert emails.enqueue_once({"n": 1}, key="k").created


@pytest.mark.parametrize("key", ["", "x" * 1025])
def test_given_invalid_key_when_enqueued_then_configuration_error(pail: Pail, key: str) -> None:
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 1}, key=key)


def test_given_key_when_digested_then_fixed_width_hex() -> None:
    assert len(digest("order-42")) == 64
    assert digest("order-42") != digest("order-43")


def test_given_keyed_producer_crashed_before_its_waiting_record_when_repeated_then_one_job_runs_after_once(
    pail: Pail, hooked: HookedStore, counter: RequestCounter
) -> None:
    export = pail.enqueue({"step": "export"})

    def crash() -> None:
        raise SimulatedCrash

    hooked.before("put", pail.keys.prefix("wait/"), crash)
    with pytest.raises(SimulatedCrash):  # the key record landed, the waiting record did not
        Pail(hooked).enqueue({"step": "merge"}, key="merge-42", after=[export])
    before = counter.total()
    repeat = pail.enqueue_once({"step": "other"}, key="merge-42", after=[export])
    repaired = counter.total() - before
    again = pail.enqueue_once({"step": "other"}, key="merge-42", after=[export])
    repeated = counter.total() - before - repaired

    assert not repeat.created and again == EnqueueResult(repeat.id, created=False)
    # PUT key (412), GET record, HEADs of wait/ queue/ run/ done/ dlq/ (x3 rounds: no job),
    # PUT wait/, HEAD done/ of the dependency.
    assert repaired == 2 + 15 + 2, counter.by_operation
    assert repeated == 3  # PUT key (412), GET record, HEAD wait/: waiting
    status = pail.status(repeat.id)
    assert status is not None and status.state is JobState.WAITING
    assert pail.stats().waiting == 1 and pail.stats().pending == 1  # no entry beside it
    ran: list[object] = []

    def handler(payload: object) -> object:
        ran.append(payload)
        return payload

    while pail.work_once(handler) or pail.stats().pending:
        pail.flush()
        pail.reap()  # the late edge's look (the deployed reaper runs every minute)

    assert ran == [{"step": "export"}, {"step": "merge"}]
    assert pail.result(repeat.id) == {"step": "merge"}
    assert pail.enqueue({"step": "late"}, key="merge-42", after=[export]) == repeat.id
    assert pail.stats().waiting == 0 and pail.stats().pending == 0
