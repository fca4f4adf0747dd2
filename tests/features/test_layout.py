"""The layout marker: a process not told the shard count finds it in the bucket (issue 16).

Without it, ``pail stats``, ``status``, ``result`` and a worker that were not
given ``--shards``/``PAIL_SHARDS`` saw a sharded queue as empty.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest

from pail import MemoryStore, Pail
from pail.keys import QUEUE, Keys, shard_of
from pail.protocol import layout
from pail.status import JobState
from tests.support.command import Invoke
from tests.support.counting import RequestCounter
from tests.support.queues import Connect

MARKER = "_pail/shards"


def _marker(pail: Pail) -> int | None:
    found = pail.store.get(MARKER)
    assert found is not None, "no layout marker"
    return layout.decode(found.body)


def _work_all(pail: Pail, limit: int = 200) -> Counter[str]:
    """Claim (not poll: every source each time) and complete until the queue is empty."""
    ran: Counter[str] = Counter()
    for _ in range(limit):
        message = pail.claim()
        if message is None:
            return ran
        ran[message.payload["n"]] += 1
        message.complete({"n": message.payload["n"]})
    raise AssertionError("the queue did not drain within the bound")


def test_a_pail_without_a_count_sees_a_sharded_queue(
    connect: Connect, counter: RequestCounter
) -> None:
    producer = connect(shards=4)
    jobs = [producer.enqueue({"n": str(i)}) for i in range(12)]
    assert {shard_of(job, 4) for job in jobs} != {0}  # jobs sit in several shards
    assert _marker(producer) == 4

    before = counter.by_operation["GetObject"]
    reader = connect()
    assert reader.stats().pending == 12
    assert reader.keys.shards == 4
    status = reader.status(jobs[0])
    assert status is not None and status.state is JobState.PENDING
    assert counter.by_operation["GetObject"] - before == 2  # the marker once, then the entry

    worker = connect()
    assert _work_all(worker) == Counter({str(i): 1 for i in range(12)})
    assert connect().result(jobs[3]) == {"n": "3"}
    assert connect().stats().done == 12


def test_the_cli_without_shards_sees_a_sharded_queue(
    connect: Connect, invoke: Invoke, bucket: str
) -> None:
    producer = connect(shards=4)
    jobs = [producer.enqueue({"n": str(i)}) for i in range(6)]
    stats = json.loads(invoke("stats", bucket, "--json").stdout)
    assert stats["pending"] == 6
    listed = json.loads(invoke("queues", bucket, "--json").stdout)
    assert listed["foreign"] == []  # _pail/ is the queue's own, not another application's
    shown = invoke("status", bucket, jobs[0], "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state"] == "pending"


def test_a_grown_count_updates_the_marker_and_a_smaller_one_leaves_it(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    four = connect(shards=4)
    four.enqueue({"n": "a"})
    assert _marker(four) == 4
    sixteen = connect(shards=16)
    sixteen.enqueue({"n": "b"})
    assert _marker(four) == 16
    with caplog.at_level(logging.WARNING, logger="pail"):
        late = connect(shards=4)
        late.enqueue({"n": "c"})  # explicit wins for its own keys...
    assert _marker(four) == 16  # ...but never shrinks the marker
    assert "has 16 shards but this process uses 4" in caplog.text
    assert late.keys.shards == 4
    assert connect().keys.shards == 16
    assert connect().stats().pending == 3


def test_an_explicit_single_shard_writes_no_marker_and_costs_nothing_more(
    connect: Connect, counter: RequestCounter
) -> None:
    pail = connect(shards=1)
    pail.enqueue({"n": "a"})
    assert counter.by_operation == Counter({"PutObject": 1})
    message = pail.claim()
    assert message is not None
    assert pail.store.get(MARKER) is None


def test_an_explicit_count_writes_the_marker_once_per_pail(
    connect: Connect, counter: RequestCounter
) -> None:
    pail = connect(shards=8)
    for i in range(3):
        pail.enqueue({"n": str(i)})
    # 1 GET of the marker (missing), 1 conditional PUT of it, then 1 PUT per job.
    assert counter.by_operation == Counter({"GetObject": 1, "PutObject": 4})
    before = counter.by_operation
    assert pail.claim() is not None  # no request for the layout per claim
    after = counter.by_operation
    # The claimed entry's GET, and the first refill's read of the limits (once per REFRESH).
    assert after["GetObject"] - before["GetObject"] <= 2


def test_hostile_marker_bytes_stop_neither_stats_nor_a_worker(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    flat = connect(shards=1)
    job = flat.enqueue({"n": "a"})
    for body in (b"\xff\xfe not json", b'{"v": 1, "shards": 3}', b"[]", b"x" * 5000):
        flat.store.put(MARKER, body)
        with caplog.at_level(logging.WARNING, logger="pail"):
            reader = connect()
            assert reader.stats().pending == 1  # read as one shard: the flat layout
        assert "is not one pail writes" in caplog.text
        caplog.clear()
    worker = connect()
    assert _work_all(worker) == Counter({"a": 1})
    assert connect().result(job) == {"n": "a"}
    # A publisher replaces the foreign bytes, If-Match what it read.
    connect(shards=2).enqueue({"n": "b"})
    assert _marker(flat) == 2


def test_discovery_and_publish_on_a_memory_store() -> None:
    store = MemoryStore("jobs")
    keys = Keys("reports")
    assert layout.discover(store, keys) == 1
    assert layout.publish(store, keys, 4) == 4
    assert layout.publish(store, keys, 2) == 4  # never shrinks
    assert layout.publish(store, keys, 32) == 32
    assert layout.discover(store, keys) == 32
    assert layout.discover(store, Keys()) == 1  # one marker per queue
    assert MemoryStore.keys(store) == ["reports/_pail/shards"]
    # The marker is not under any state prefix: no listing of a queue sees it.
    pail = Pail(store, queue="reports")
    assert pail.keys.shards == 32 and pail.stats().pending == 0
    assert not pail.store.list(keys.prefix(QUEUE)).items
