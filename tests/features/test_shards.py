"""Sharded queues: keys spread over shard prefixes, claimers over shards, growth without draining."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from pail import MemoryStore, Pail
from pail.clock import ManualClock
from pail.errors import ConfigurationError
from pail.keys import DONE, QUEUE, RUN, Keys, shard_of
from pail.protocol.claim import PRIORITY_LOOK_EVERY, Claimer
from pail.protocol.lease import Lease
from pail.status import JobState


def _keys(store: MemoryStore) -> list[str]:
    """The store's job keys: not the layout marker under _pail/ (``test_layout.py``)."""
    return [key for key in MemoryStore.keys(store) if not key.startswith("_pail/")]


def _work_all(pail: Pail, ran: Counter[str], limit: int = 10_000) -> None:
    """Claim and complete until a claim finds nothing (bounded)."""
    for _ in range(limit):
        message = pail.claim()
        if message is None:
            return
        ran[message.payload["n"]] += 1
        message.complete({"n": message.payload["n"]})
    raise AssertionError("the queue did not drain within the bound")


def _drain(pail: Pail, ran: Counter[str]) -> None:
    # A worker idle after an empty shard lists one source per claim: a few
    # empty claims in a row (one per source) mean every source is empty.
    for _ in range(2 * len(pail.keys.sources()) + 2):
        _work_all(pail, ran)


def test_one_shard_is_the_flat_layout() -> None:
    store = MemoryStore("jobs")
    job = Pail(store, queue="reports").enqueue({"n": "a"})
    assert _keys(store) == [f"reports/queue/{job}"]


def test_a_sharded_job_lives_in_its_shard_for_life() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store, shards=4)
    job = pail.enqueue({"n": "a"})
    shard = shard_of(job, 4)
    assert _keys(store) == [f"queue/{shard}/{job}"]
    message = pail.claim()
    assert message is not None and message.id == job
    assert _keys(store) == [f"run/{shard}/{job}"]
    message.complete({"ok": True})
    assert pail.flush()  # the lease's removal, which complete leaves in flight
    assert _keys(store) == [f"done/{shard}/{job}"]
    assert pail.result(job) == {"ok": True}
    status = pail.status(job)
    assert status is not None and status.state is JobState.DONE


def test_shards_spread_and_every_job_runs_once() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store, shards=4)
    jobs = [pail.enqueue({"n": str(i)}) for i in range(200)]
    used = Counter(key.split("/")[1] for key in _keys(store))
    assert set(used) == {"0", "1", "2", "3"}  # 200 ids hash into every shard
    assert pail.stats().pending == 200
    ran: Counter[str] = Counter()
    _drain(pail, ran)
    assert ran == Counter({str(i): 1 for i in range(200)})
    assert pail.stats().done == 200 and pail.stats().pending == 0
    assert all(pail.result(job) == {"n": str(i)} for i, job in enumerate(jobs))


def test_shard_count_is_checked() -> None:
    for bad in (0, 3, 2048):
        with pytest.raises(ConfigurationError, match="power of two"):
            Pail(MemoryStore("jobs"), shards=bad)


def test_an_idle_worker_lists_one_shard_per_claim() -> None:
    pail = Pail(MemoryStore("jobs"), shards=16)
    clock = ManualClock()
    claimer = Claimer(pail.store, pail.keys, visibility_timeout=30, clock=clock, owner="w")
    claims = 40
    for _ in range(claims):
        assert claimer.claim(polling=True) is None
    # The first empty claim looks at every source (17); each poll after it at one.
    assert claimer.lists <= claims + 17 + 2
    # A claim that is not a poll (the Lambda worker's, work_once's) looks everywhere,
    # and once at the high-priority place (tests/features/test_sharded_priority.py).
    clock.advance(PRIORITY_LOOK_EVERY)
    before = claimer.lists
    assert claimer.claim() is None
    assert claimer.lists - before == 17 + 2 + 1


def test_a_lone_job_is_found_within_one_round_of_the_shards() -> None:
    pail = Pail(MemoryStore("jobs"), shards=16)
    claimer = Claimer(pail.store, pail.keys, visibility_timeout=30, clock=pail.clock, owner="w")
    assert claimer.claim(polling=True) is None
    job = pail.enqueue({"n": "x"})
    for _poll in range(1, len(pail.keys.sources()) + 1):
        lease = claimer.claim(polling=True)
        if lease is not None:
            break
    assert lease is not None and lease.job_id == job
    # After an empty poll, a claim (not a poll) finds a lone job at once, wherever it is.
    assert claimer.claim(polling=True) is None
    other = pail.enqueue({"n": "y"})
    found = claimer.claim()
    assert found is not None and found.job_id == other


def test_high_priority_and_delayed_jobs_in_a_sharded_queue() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store, shards=4)
    normal = [pail.enqueue({"n": str(i)}) for i in range(20)]
    high = pail.enqueue({"n": "high"}, priority="high")
    later = pail.enqueue({"n": "later"}, delay=3600)
    assert f"queue/!0000000000000-{high}" in _keys(store)  # the one place every claim looks at
    waiting = pail.status(later)
    assert waiting is not None and waiting.state is JobState.PENDING
    assert pail.stats().delayed == 1
    ran: Counter[str] = Counter()
    _drain(pail, ran)
    assert ran["high"] == 1 and "later" not in ran
    assert sum(ran.values()) == len(normal) + 1
    assert pail.cancel(later) is True


def _hold(pail: Pail, clock: ManualClock) -> Lease:
    """Claim one job without a heartbeat: a worker that will die holding it."""
    lease = Claimer(
        pail.store, pail.keys, visibility_timeout=30, clock=clock, owner="doomed"
    ).claim()
    assert lease is not None
    return lease


def test_growth_one_to_four_to_sixteen_with_jobs_in_flight() -> None:
    clock = ManualClock(wall=datetime(2026, 1, 1, tzinfo=UTC))
    store = MemoryStore("jobs", now=clock.now)

    def queue(shards: int) -> Pail:
        return Pail(store, shards=shards, clock=clock, visibility_timeout=30, max_retries=3)

    one, four, sixteen = queue(1), queue(4), queue(16)
    enqueued: dict[str, str] = {}
    for pail, count in ((one, 30), (four, 30), (sixteen, 30)):
        for i in range(count):
            n = f"{pail.keys.shards}-{i}"
            enqueued[n] = pail.enqueue({"n": n})
    # Each count's jobs are in its own layout.
    assert sum(1 for k in _keys(store) if Keys().entry_id(k, QUEUE)) == 30
    # In flight under the old counts: a held message of each, and a lease whose
    # worker dies (its job must be reclaimed by a reaper of the new count).
    held_one = one.claim()
    held_four = four.claim()
    dying = _hold(four, clock)
    assert held_one is not None and held_four is not None
    cancelled = enqueued["1-29"]
    assert sixteen.cancel(cancelled) is True  # a flat job, cancelled through 16 shards
    # Every job is visible through the grown queue.
    for job in enqueued.values():
        status = sixteen.status(job)
        assert status is not None, job
    # The old holders finish their jobs where they are.
    held_one.complete({"n": held_one.payload["n"]})
    held_four.complete({"n": held_four.payload["n"]})
    assert sixteen.result(held_one.id) == {"n": held_one.payload["n"]}
    assert sixteen.result(held_four.id) == {"n": held_four.payload["n"]}
    # The dying worker's lease expires; the grown queue's reaper requeues it in its shard.
    clock.advance(31 + 2)
    report = sixteen.reap()
    assert report.requeued_ids == [dying.job_id]
    assert dying.key.replace(RUN, QUEUE, 1) in _keys(store)  # in its own layout
    ran: Counter[str] = Counter()
    _drain(sixteen, ran)
    ran[held_one.payload["n"]] += 1
    ran[held_four.payload["n"]] += 1
    expected = {n: 1 for n, job in enqueued.items() if job != cancelled}
    assert ran == Counter(expected)
    assert one.flush() and four.flush() and sixteen.flush()  # lease removals in flight
    stats = sixteen.stats()
    assert (stats.pending, stats.running, stats.done, stats.cancelled) == (0, 0, 89, 1)
    assert not [k for k in _keys(store) if k.startswith((QUEUE, RUN))]
    # Results sit in the shard each job was enqueued under.
    layouts = Counter(
        "flat" if k.count("/") == 1 else "shard" for k in _keys(store) if k.startswith(DONE)
    )
    assert layouts == Counter({"flat": 30, "shard": 60})


def test_pinned_keys_parse_only_their_shard(monkeypatch: Any) -> None:
    keys = Keys(shards=4)
    assert keys.entry_id("queue/3/abc", QUEUE) == "abc"
    assert keys.entry_id("queue/abc", QUEUE) == "abc"
    assert keys.entry_id("queue/03/abc", QUEUE) is None  # not a shard segment pail writes
    assert keys.entry_id("queue/3/a/b", QUEUE) is None
    flat = keys.sources()[0]
    assert flat.entry_id("queue/3/abc", QUEUE) is None
    assert keys.of_key("run/2/abc", RUN).done("abc") == "done/2/abc"


def test_purge_and_dead_letters_sum_every_shard_and_layout() -> None:
    store = MemoryStore("jobs")
    one, four = Pail(store), Pail(store, shards=4, max_retries=0)
    jobs = [one.enqueue({"n": str(i)}) for i in range(10)]
    jobs += [four.enqueue({"n": str(i)}) for i in range(10, 20)]
    report = four.purge()
    assert sorted(report.cancelled) == sorted(jobs)
    assert four.stats().pending == 0 and four.stats().cancelled == 20
    failing = [one.enqueue({"n": "f1"}), four.enqueue({"n": "f4"})]
    for _ in range(4 * len(four.keys.sources())):
        message = four.claim()
        if message is not None:
            message.fail(RuntimeError("boom"))
    assert sorted(letter.job_id for letter in four.dead_letters()) == sorted(failing)
    assert sorted(four.redrive(all=True)) == sorted(failing)
    assert four.stats().pending == 2
