"""Concurrency limits on the real local S3 server: the basics, by count, never by time.

The 16-worker measurement, rate limits and the entry points' behaviour are
``edge``'s (their own files); these check what the protocol promises on a
real server: a limit set in the bucket holds for workers started with no
setting, a group at its limit is passed by, a slot goes back on every end,
a dead worker's slot comes back through the reaper, and foreign bytes in
the limits object limit the queue to one job at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pail import Pail
from pail.clock import SystemClock
from pail.protocol.claim import Claimer
from pail.protocol.limits import slots
from tests.support.counting import RequestCounter
from tests.support.waiting import wait_until

Connect = Callable[..., Pail]


def test_given_a_limit_when_six_workers_drain_then_at_most_two_handlers_run_at_once(
    connect: Connect,
) -> None:
    producer = connect()
    producer.set_limit(2)
    ids = [producer.enqueue({"i": i}) for i in range(24)]
    lock = threading.Lock()
    running = 0
    peak = 0
    ran: list[str] = []

    def drain() -> None:
        nonlocal running, peak
        pail = connect()  # a worker started with no setting: the bucket's limit holds

        def handler(payload: dict[str, int]) -> int:
            nonlocal running, peak
            with lock:
                running += 1
                peak = max(peak, running)
            # Overlap: wait until a second handler runs (or this is the last job), so
            # that a third, if the limit let one start, would be counted meanwhile.
            wait_until(lambda: running >= 2 or len(ran) >= len(ids) - 1, what="a second handler")
            with lock:
                running -= 1
                ran.append(str(payload["i"]))
            return payload["i"]

        idle = 0
        while idle < 40 and len(ran) < len(ids):
            if pail.work_once(handler):
                idle = 0
            else:
                idle += 1
                threading.Event().wait(0.05)
        pail.flush()

    workers = [threading.Thread(target=drain) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert sorted(ran, key=int) == [str(i) for i in range(24)]
    assert peak <= 2
    assert all(producer.result(job_id) is not None for job_id in ids)
    assert producer.store.list(producer.keys.slots()).items == ()  # every slot given back


def test_given_a_group_at_its_limit_when_claiming_then_the_other_group_is_claimed(
    connect: Connect, counter: RequestCounter
) -> None:
    producer = connect()
    producer.set_limit(1, group="*")
    busy = [producer.enqueue({"i": i}, group="busy") for i in range(40)]
    small = producer.enqueue({"i": 0}, group="small")
    worker = connect()

    first = worker.claim()
    assert first is not None and first.id in busy
    gets_before = counter.total("GetObject")
    second = worker.claim()

    assert second is not None and second.id == small
    # At most the one busy entry whose claim found its group full was read; the
    # other 38 were passed by from their keys.
    busy_reads = counter.total("GetObject") - gets_before
    assert busy_reads <= 3  # that entry, the small one, the limits (at most once)
    assert worker.claim() is None  # both groups at their limit
    first.complete(1)
    second.complete(2)
    worker.flush()
    assert producer.status(small) is not None


def test_given_a_dead_worker_when_the_reaper_passes_then_its_slot_comes_back(
    connect: Connect,
) -> None:
    producer = connect(visibility_timeout=2)
    producer.set_limit(1)
    producer.enqueue({"i": 0})
    producer.enqueue({"i": 1})
    # A worker's claim, and then its process dies: no heartbeat, no settle.
    dead = Claimer(
        producer.store,
        producer.keys,
        visibility_timeout=2,
        clock=SystemClock(),
        owner="dead-worker",
    )
    held = dead.claim()
    assert held is not None and held.slots
    other = connect(visibility_timeout=2)
    assert other.claim() is None and other.claims_limited

    recovered = 0
    for _ in range(200):  # until the server's clock says the lease expired
        report = producer.reap()
        recovered += report.slots.recovered if report.slots is not None else 0
        if recovered:
            break
        threading.Event().wait(0.05)

    assert recovered == 1
    taken = None
    for _ in range(100):  # the worker's "full" mark lasts limits.gate.FULL_FOR
        taken = other.claim()
        if taken is not None:
            break
        threading.Event().wait(0.05)
    assert taken is not None
    slot = taken.lease.slots[0]
    # The dead worker's lease was fenced; its give-back cannot free the new holder's slot.
    assert not slots.give_back(producer.store, held.slots[0])
    found = producer.store.get(slot.key)
    assert found is not None and found.etag == slot.etag
    taken.complete(None)
    other.flush()


def test_given_foreign_bytes_in_the_limits_object_then_one_job_runs_at_a_time(
    connect: Connect,
) -> None:
    producer = connect()
    producer.enqueue({"i": 0})
    producer.enqueue({"i": 1})
    producer.store.put(producer.keys.limits(), b"\x00 not a limits object")
    limits = producer.limits()
    assert limits.concurrency == 1 and limits.reason
    first, second = connect(), connect()

    held = first.claim()
    assert held is not None
    assert second.claim() is None and second.claims_limited
    assert producer.set_limit(3).reason is None  # set_limit replaces the bytes
    held.complete(None)
    first.flush()


def test_given_a_limited_queue_when_jobs_fail_or_are_released_then_the_slot_goes_back_at_once(
    connect: Connect,
) -> None:
    producer = connect(max_retries=0)
    producer.set_limit(1)
    for i in range(3):
        producer.enqueue({"i": i})
    worker = connect(max_retries=0)

    def claim_and(action: Callable[[Any], object]) -> None:
        message = worker.claim()
        assert message is not None
        action(message)
        assert producer.store.list(producer.keys.slots()).items == ()

    claim_and(lambda m: m.release("stopping", started=False))
    claim_and(lambda m: m.fail("boom"))  # no retries left: dead-lettered
    claim_and(lambda m: m.complete({"ok": True}))
    worker.flush()
