"""Concurrency limits and fair sharing (``pail.protocol.limits``) on a memory store, by request.

The clocks are manual: the worker's (``ManualClock``) and the server's
(``MemoryStore(now=...)``) move only when a test says, so a lease's expiry,
a slot's age and the gate's refresh are decided by the test, with no wait.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pail.clock import ManualClock
from pail.codec import LeaseRecord
from pail.errors import ConfigurationError, DecodeError
from pail.keys import Keys
from pail.message import Message
from pail.protocol import limits
from pail.protocol.claim import Named
from pail.protocol.limits import config, gate, groups, slots
from pail.protocol.reaper import Reaper
from pail.protocol.settle import Policy
from pail.queue import Pail
from pail.store.counting import CountingStore
from pail.store.memory import MemoryStore
from tests.support.hostile import ALL_BODIES
from tests.support.recording_store import RecordingStore

VT = 30.0


class StillClock(ManualClock):
    """A manual clock whose ``sleep`` does not move it: a heartbeat waits until it is stopped.

    (``ManualClock.sleep`` advances the clock, so an unsettled message's heartbeat
    thread would run the clock away and renew its lease over and over.)
    """

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if wake is not None:
            wake.wait()


def world() -> tuple[ManualClock, RecordingStore]:
    clock = StillClock()
    return clock, RecordingStore(now=clock.now)


def pail(store: RecordingStore, clock: ManualClock) -> Pail:
    return Pail(store, clock=clock, visibility_timeout=VT, reclaim=False)


def held_slots(store: RecordingStore) -> list[str]:
    listed = store.memory.keys()  # a MemoryStore method, not a dict
    return sorted(key for key in listed if key.startswith(Keys().slots()))


def test_given_a_limit_of_2_when_4_workers_claim_then_2_run_and_2_are_told_limited() -> None:
    clock, store = world()
    producer = pail(store, clock)
    for i in range(6):
        producer.enqueue({"i": i})
    producer.set_limit(2)
    workers = [pail(store, clock) for _ in range(4)]

    messages = [worker.claim() for worker in workers]

    assert [m is not None for m in messages] == [True, True, False, False]
    assert [w.claims_limited for w in workers] == [False, False, True, True]
    assert held_slots(store) == ["_pail/slots/queue/00000", "_pail/slots/queue/00001"]
    bodies = b"".join(
        found.body for key in held_slots(store) if (found := store.memory.get(key)) is not None
    )
    assert all(m.id.encode() in bodies for m in messages if m is not None)
    for m in messages:
        if m is not None:
            m.complete(None)


def test_given_a_limit_when_a_job_completes_then_its_slot_is_given_back_and_reused_by_a_put() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    for i in range(3):
        producer.enqueue({"i": i})
    producer.set_limit(1)
    worker = pail(store, clock)
    message = worker.claim()
    assert message is not None
    message.complete({"ok": True})
    worker.flush()
    assert held_slots(store) == []

    store.clear()
    again = worker.claim()

    assert again is not None
    # The index given back is tried first: one PUT of the slot, no LIST of the slots.
    slot_calls = [call for call in store.calls if call[1].startswith("_pail/slots/")]
    assert slot_calls == [("put", "_pail/slots/queue/00000")]


def test_given_a_limited_queue_when_measured_then_a_job_costs_2_requests_more() -> None:
    clock, store = world()
    producer = pail(store, clock)
    for i in range(20):
        producer.enqueue({"i": i})
    workers = [pail(store, clock)]

    def run(jobs: int) -> int:
        worker = workers[-1]
        before = store.total()
        for _ in range(jobs):
            message = worker.claim()
            assert message is not None
            message.complete({"ok": True})
        worker.flush()
        return store.total() - before

    run(1)  # the first refill
    unlimited = run(5)
    producer.set_limit(3)
    workers.append(pail(store, clock))  # its first refill reads the limits
    run(1)  # that refill, and the first slot's LIST
    limited = run(5)

    assert (limited - unlimited) / 5 == 2  # PUT and DELETE of the slot


def test_given_no_limits_when_claiming_then_no_slot_request_is_made() -> None:
    clock, store = world()
    producer = pail(store, clock)
    for i in range(5):
        producer.enqueue({"i": i})
    worker = pail(store, clock)
    store.clear()
    for _ in range(5):
        message = worker.claim()
        assert message is not None
        message.complete(None)
    worker.flush()

    keys = Counter(key for _, key in store.calls if key.startswith("_pail/"))
    # One refill: one HEAD of the pause marker, one GET of the limits (the layout: once a Pail).
    assert keys == Counter({"_pail/paused": 1, "_pail/limits": 1, "_pail/shards": 1})


def test_given_a_group_at_its_limit_when_claiming_then_its_entries_are_passed_by_without_a_get() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    big = [producer.enqueue({"i": i}, group="big") for i in range(30)]
    small = [producer.enqueue({"i": i}, group="small") for i in range(3)]
    producer.set_limit(1, group="*")
    worker = Pail(store, clock=clock, visibility_timeout=VT, reclaim=False)

    claimed = [worker.claim() for _ in range(3)]

    ids = [m.id if m is not None else None for m in claimed]
    assert ids[0] in big and ids[1] in small
    assert ids[2] is None  # both groups at their limit of 1
    big_reads = [key for op, key in store.calls if op == "get" and "~big" in key]
    # The big job claimed, and the one whose claim found its group full; the other 28
    # were passed by from their keys.
    assert len(big_reads) == 2


def test_given_many_pending_of_one_group_when_a_small_group_waits_then_it_starts_within_2_claims() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    for i in range(50):
        producer.enqueue({"i": i}, group="a")
    late = producer.enqueue({"i": 0}, group="b")
    worker = pail(store, clock)

    first, second = worker.claim(), worker.claim()

    assert first is not None and second is not None
    assert late in (first.id, second.id), (late, first.id, second.id, worker._claimer()._cache[:3])


def test_given_fair_order_then_every_group_comes_within_its_number_of_groups() -> None:
    items = [f"a{i}" for i in range(10)] + ["b0", "b1"] + ["c0"]
    lanes: dict[str, str | None] = {item: item[0] for item in items}
    ordered = groups.fair_order(items, lanes)
    assert set(ordered[:3]) == {"a0", "b0", "c0"}
    assert sorted(ordered) == sorted(items)


def test_given_group_names_then_ids_carry_them_and_bad_ones_are_refused() -> None:
    assert groups.group_of(groups.grouped_id("01JD8X3W5K9T2B7Q4R6M0N1P2S", "t-1")) == "t-1"
    with pytest.raises(ConfigurationError):
        groups.grouped_id("x", "a/b")
    with pytest.raises(ConfigurationError):
        Pail(RecordingStore()).enqueue({}, group="~")


def test_given_a_crashed_holder_when_the_reaper_passes_then_its_slot_comes_back() -> None:
    clock, store = world()
    producer = pail(store, clock)
    producer.enqueue({"i": 0})
    producer.enqueue({"i": 1})
    producer.set_limit(1)
    crashed = pail(store, clock)
    assert crashed.claim() is not None  # then its process dies: no heartbeat, no settle
    other = pail(store, clock)
    assert other.claim() is None and other.claims_limited
    reaper = Reaper(store, Keys(), Policy(None, VT))

    early = reaper.reap()
    clock.advance(VT + 2)
    late = reaper.reap()

    assert early.slots is not None and early.slots.recovered == 0
    assert late.requeued == 1 and late.slots is not None and late.slots.recovered == 1
    assert held_slots(store) == []
    clock.advance(gate.FULL_FOR)
    assert other.claim() is not None


def test_given_a_stalled_holder_when_it_wakes_then_it_cannot_free_the_new_holders_slot() -> None:
    clock, store = world()
    producer = pail(store, clock)
    producer.enqueue({"i": 0})
    producer.set_limit(1)
    stalled = pail(store, clock)
    message = stalled.claim()
    assert message is not None
    old_slot = message.lease.slots[0]
    clock.advance(VT + 2)
    Reaper(store, Keys(), Policy(None, VT)).reap()  # fences, requeues, frees the slot
    newcomer = pail(store, clock)
    taken = newcomer.claim()
    assert taken is not None
    new_slot = taken.lease.slots[0]
    assert new_slot.key == old_slot.key and new_slot.etag != old_slot.etag

    assert message.complete({"late": True}) is False  # its lease was fenced

    current = store.memory.get(new_slot.key)
    assert current is not None and current.etag == new_slot.etag  # still the newcomer's


@pytest.mark.parametrize("ending", ["fail", "release", "dead-letter"])
def test_given_a_job_that_ends_unfinished_then_its_slot_is_given_back_at_once(ending: str) -> None:
    clock, store = world()
    producer = Pail(store, clock=clock, visibility_timeout=VT, reclaim=False, max_retries=0)
    producer.enqueue({"i": 0})
    producer.set_limit(1)
    worker = Pail(store, clock=clock, visibility_timeout=VT, reclaim=False, max_retries=0)
    message = worker.claim()
    assert isinstance(message, Message) and held_slots(store)

    if ending == "release":
        message.release("stopping", started=False)
    else:
        message.fail("boom")  # max_retries=0: "fail" is a dead-letter too

    assert held_slots(store) == []


def test_given_a_stale_slot_write_when_the_lease_comes_late_then_the_slot_is_proved() -> None:
    clock, store = world()
    keys = Keys()
    g = gate.Gate(store, keys, clock=clock, rng=__import__("random").Random(1))
    limits.set_limit(store, keys, 1)
    g.refresh()
    held = g.admit("job-1", "lease-1", keys.run("job-1"))
    assert isinstance(held, list) and len(held) == 1
    clock.advance(VT)  # the claim stalled between its slot and its lease

    proved = g.prove(held, answered=clock.monotonic(), visibility_timeout=VT)
    assert proved is not None and proved[0].etag != held[0].etag

    store.memory.delete(held[0].key)  # a recovery pass freed it meanwhile
    assert g.prove(proved, answered=clock.monotonic() + VT, visibility_timeout=VT) is None


# -- foreign bytes -----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"v": 2, "concurrency": 3}',
        b'{"v": 1, "concurrency": -1}',
        b'{"v": 1, "concurrency": true}',
        b'{"v": 1, "concurrency": 1e9}',
        b'{"v": 1, "groups": {"a/b": 1}}',
        b'{"v": 1, "groups": [1]}',
        b"\xff\xfe",
        b'{"v": 1, "concurrency": ' + b"[" * 200 + b"]" * 200 + b"}",
    ],
)
def test_given_foreign_bytes_in_the_limits_object_then_the_queue_runs_one_job_at_a_time(
    body: bytes,
) -> None:
    decoded = config.decode(body)
    assert decoded.concurrency == config.FOREIGN_CONCURRENCY and decoded.reason
    clock, store = world()
    producer = pail(store, clock)
    producer.enqueue({"i": 0})
    producer.enqueue({"i": 1})
    store.memory.put(Keys().limits(), body)
    workers = [pail(store, clock) for _ in range(2)]
    assert [w.claim() is not None for w in workers] == [True, False]
    # A set_limit replaces the unreadable bytes.
    assert producer.set_limit(4).concurrency == 4


@pytest.mark.parametrize("body", [b"garbage", b'{"v": 1, "job": 3}', b"{}", b""])
def test_given_foreign_bytes_in_a_slot_then_it_counts_as_held_until_the_reaper_frees_it(
    body: bytes,
) -> None:
    clock, store = world()
    producer = pail(store, clock)
    producer.enqueue({"i": 0})
    producer.set_limit(1)
    store.memory.put("_pail/slots/queue/00000", body)
    store.memory.put("_pail/slots/queue/not-a-slot", b"x")  # passed by, never deleted
    worker = pail(store, clock)
    assert worker.claim() is None and worker.claims_limited

    clock.advance(VT + 2)
    report = Reaper(store, Keys(), Policy(None, VT)).reap()

    assert report.slots is not None and report.slots.recovered == 1
    assert report.slots.skipped == 1
    assert held_slots(store) == ["_pail/slots/queue/not-a-slot"]
    clock.advance(gate.FULL_FOR)
    assert worker.claim() is not None


def test_given_a_slot_naming_a_foreign_run_key_then_its_lease_counts_as_gone() -> None:
    _, store = world()
    keys = Keys()
    record = slots.SlotRecord("job-1", "tok", "done/job-1")
    store.memory.put("done/job-1", LeaseRecord("job-1", None, 1, "w", "tok").encode())
    assert slots.lease_alive(store, keys, record) is False
    good = slots.SlotRecord("job-1", "tok", keys.run("job-1"))
    store.memory.put(keys.run("job-1"), LeaseRecord("job-1", None, 1, "w", "tok").encode())
    assert slots.lease_alive(store, keys, good) is True
    store.memory.put(keys.run("job-1"), b"\x00garbage")
    assert slots.lease_alive(store, keys, good) is False


def test_given_set_limit_then_overrides_and_defaults_are_kept_apart() -> None:
    _, store = world()
    keys = Keys()
    limits.set_limit(store, keys, 5)
    limits.set_limit(store, keys, 2, group="*")
    limits.set_limit(store, keys, 7, group="vip")
    now = limits.set_limit(store, keys, None)
    assert (now.concurrency, now.group_concurrency, dict(now.groups)) == (None, 2, {"vip": 7})
    assert now.group_limit("vip") == 7 and now.group_limit("other") == 2
    assert now.group_limit(None) is None
    assert limits.read(store, keys) == now
    with pytest.raises(ConfigurationError):
        limits.set_limit(store, keys, -1)
    assert limits.clear(store, keys) and limits.read(store, keys) == limits.NONE


# -- any bytes: a value or the documented outcome, never another exception ----------


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.binary(max_size=300) | st.sampled_from(ALL_BODIES))
def test_given_any_bytes_then_the_limits_decoder_gives_limits_never_more_than_one_if_foreign(
    body: bytes,
) -> None:
    decoded = config.decode(body)
    assert isinstance(decoded, config.Limits)
    if decoded.reason is not None:
        assert decoded.concurrency == 1 and not decoded.groups


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.binary(max_size=300) | st.sampled_from(ALL_BODIES))
def test_given_any_bytes_then_the_slot_decoder_gives_a_slot_or_decode_error(body: bytes) -> None:
    try:
        record = slots.SlotRecord.decode(body)
    except DecodeError:
        return
    assert record.job_id and record.lease and record.run


@given(
    st.builds(
        config.Limits,
        concurrency=st.none() | st.integers(0, config.MAX_CONCURRENCY),
        group_concurrency=st.none() | st.integers(0, config.MAX_CONCURRENCY),
        groups=st.dictionaries(st.from_regex(r"\A[a-z][a-z0-9-]{0,10}\Z"), st.integers(0, 50)),
    )
)
@settings(max_examples=100, derandomize=True, database=None, deadline=None)
def test_given_limits_pail_wrote_then_they_decode_to_themselves(limits: config.Limits) -> None:
    assert config.decode(limits.encode("tok")) == limits


# -- the other features keep their behaviour under limits ---------------------------


def test_given_a_limit_when_a_running_job_is_cancelled_then_its_slot_goes_back_at_its_settle() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    job_id = producer.enqueue({"i": 0}, group="t")
    producer.set_limit(1, group="*")
    worker = pail(store, clock)
    message = worker.claim()
    assert message is not None and len(held_slots(store)) == 1

    assert producer.cancel(job_id) is True
    assert message.complete("ignored") is False  # the cancel deleted the lease

    assert held_slots(store) == []


def test_given_grouped_jobs_then_delays_priorities_dedup_and_redrive_keep_the_group() -> None:
    clock, store = world()
    producer = Pail(store, clock=clock, visibility_timeout=VT, reclaim=False, max_retries=0)
    producer.set_limit(1, group="*")
    high = producer.enqueue({"n": "high"}, group="t", priority="high")
    keyed = producer.enqueue({"n": "keyed"}, group="t", key="k-1")
    batch = producer.enqueue_many([{"n": "b"}], group="u")
    assert all(groups.group_of(job_id) is not None for job_id in (high, keyed, *batch))
    worker = Pail(store, clock=clock, visibility_timeout=VT, reclaim=False, max_retries=0)

    first = worker.claim()
    second = worker.claim()
    assert first is not None and first.id == high  # high priority first, within its group
    assert second is not None and second.id in batch  # group t is full: u's job
    assert worker.claim() is None and worker.claims_limited
    first.fail("boom")  # dead-lettered (no retries): its slot goes back
    assert producer.redrive(high) == [high]
    second.complete(None)
    third = worker.claim()
    assert third is not None and third.id in (high, keyed)


def test_given_a_sharded_namespaced_queue_then_its_slots_live_under_its_namespace() -> None:
    clock, store = world()
    producer = Pail(store, clock=clock, queue="reports", shards=4, reclaim=False)
    producer.set_limit(1)
    for i in range(4):
        producer.enqueue({"i": i})
    worker = Pail(store, clock=clock, queue="reports", shards=4, reclaim=False)
    message = worker.claim()
    assert message is not None
    assert held_slots(store) == []  # the default queue's slots: none
    keys = store.memory.keys()
    assert [key for key in keys if "/_pail/slots/" in key] == ["reports/_pail/slots/queue/00000"]
    assert worker.claim() is None and worker.claims_limited
    message.complete(None)
    assert worker.claim() is not None


def test_given_a_paused_limited_queue_then_no_slot_is_taken() -> None:
    clock, store = world()
    producer = pail(store, clock)
    producer.enqueue({"i": 0})
    producer.set_limit(2)
    producer.pause("deploying")
    worker = pail(store, clock)
    assert worker.claim() is None and worker.claims_paused and not worker.claims_limited
    assert held_slots(store) == []


def test_given_a_limit_when_purged_then_pending_jobs_go_and_no_slot_is_left() -> None:
    clock, store = world()
    producer = pail(store, clock)
    for i in range(3):
        producer.enqueue({"i": i}, group="t")
    producer.set_limit(1)
    producer.purge()
    assert pail(store, clock).claim() is None
    assert held_slots(store) == []


def test_given_a_full_queue_when_a_named_entry_is_claimed_then_it_is_limited() -> None:
    clock, store = world()
    producer = pail(store, clock)
    first = producer.enqueue({"i": 0})
    second = producer.enqueue({"i": 1})
    producer.set_limit(1)
    holder = pail(store, clock)
    assert holder.claim_key(producer.keys.queue(first)) is not None
    woken = pail(store, clock)

    assert woken.claim_key(producer.keys.queue(second)) is None

    assert woken.named_claim_found is Named.LIMITED and woken.claims_limited
    assert woken.status(second) is not None  # still pending: nothing was written for it
    assert len(held_slots(store)) == 1


def test_given_a_full_queue_when_a_worker_without_a_slot_claims_then_it_reads_no_entry() -> None:
    clock, store = world()
    producer = pail(store, clock)
    for i in range(5):
        producer.enqueue({"i": i})
    producer.set_limit(1)
    holder = pail(store, clock)
    running = holder.claim()
    assert running is not None
    blocked = pail(store, clock)
    store.clear()

    assert blocked.claim() is None
    clock.advance(gate.FULL_FOR)  # its mark of the full queue has run out: it looks again
    assert blocked.claim() is None

    assert blocked.claims_limited
    # The slots are listed before any entry is read: a blocked worker's poll is one LIST of
    # the slots (its first claim also lists the queue and reads the pause and the limits).
    entry_reads = [key for op, key in store.calls if op == "get" and key.startswith("queue/")]
    assert entry_reads == []
    assert [key for op, key in store.calls if op == "list"] == [
        "queue/",
        "_pail/slots/queue/",
        "_pail/slots/queue/",
    ]
    assert not [call for call in store.calls if call[0] == "put"]  # and no failed write
    running.complete(None)


def test_given_a_free_slot_when_a_worker_without_a_hint_claims_then_one_list_serves_the_claim() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    for i in range(3):
        producer.enqueue({"i": i})
    producer.set_limit(2)
    worker = pail(store, clock)
    store.clear()

    message = worker.claim()

    assert message is not None
    slot_calls = [call for call in store.calls if call[1].startswith("_pail/slots/")]
    assert slot_calls == [("list", "_pail/slots/queue/"), ("put", slot_calls[1][1])]
    message.complete(None)


def test_given_a_slot_taken_again_after_the_recovery_listed_it_then_the_new_holder_keeps_it() -> (
    None
):
    # The recovery lists an old slot; before its GET, the slot is freed and a claimer takes
    # that index for a lease it has not written yet. The GET then reads that young slot,
    # which the old listing's age says nothing about (test_limits_sim's seed 199 found it).
    clock = StillClock()
    memory = MemoryStore("jobs", now=clock.now)
    keys = Keys()
    key = slots.slot_key(slots.scope(keys), 0)
    crashed = slots.take(memory, key, slots.SlotRecord("j1", "t1", keys.run("j1")), sent_at=0.0)
    assert crashed is not None
    clock.advance(VT + 5)
    taken: list[slots.Held] = []

    def between_list_and_get(operation: str, requested: str) -> None:
        if operation == "GetObject" and requested == key and not taken:
            assert slots.give_back(memory, crashed)  # freed (the crashed one's own retry)
            record = slots.SlotRecord("j2", "t2", keys.run("j2"))
            won = slots.take(memory, key, record, sent_at=clock.monotonic())
            assert won is not None
            taken.append(won)  # its lease is not written yet: the claim is between the two

    store = CountingStore(memory, on_request=between_list_and_get)

    report = slots.recover(store, keys, visibility_timeout=VT)

    assert report.recovered == 0
    assert taken and memory.get(key) is not None
    found = memory.get(key)
    assert found is not None and found.etag == taken[0].etag


def test_given_no_limits_then_a_busy_worker_reads_them_every_absent_refresh_not_every_refresh() -> (
    None
):
    clock, store = world()
    producer = pail(store, clock)
    worker = pail(store, clock)

    def limit_reads(seconds: float) -> int:
        """Claims a job every REFRESH for ``seconds``, one refill each; the limits' GETs."""
        store.clear()
        for i in range(int(seconds / gate.REFRESH)):
            producer.enqueue({"i": i})  # one entry a page: every claim refills
            message = worker.claim()
            assert message is not None
            message.complete(None)
            worker.flush()
            clock.advance(gate.REFRESH)
        return sum(1 for _, key in store.calls if key == "_pail/limits")

    # A queue without limits: one GET (a 404) per ABSENT_REFRESH, where it was one per REFRESH.
    assert limit_reads(gate.ABSENT_REFRESH) == 1
    producer.set_limit(3)
    # A first limit is read within ABSENT_REFRESH; from then on, every REFRESH.
    assert limit_reads(gate.ABSENT_REFRESH) >= 1
    assert limit_reads(4 * gate.REFRESH) == 4
    producer.enqueue({"last": True})
    message = worker.claim()
    assert message is not None and held_slots(store)  # its claims hold slots now
    message.complete(None)
