"""The entry points at a limit (``pail limit``): the worker Lambda returns at once, work-once stops,
``work`` waits politely, and a rate limit holds on the claim path (docs/limits.md)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from pail import Pail
from pail.aws.lambda_worker import lambda_worker
from pail.clock import ManualClock
from pail.config import ENV_BUCKET, ENV_LIMITS
from pail.protocol.limits.rate import Rate
from tests.support.clocks import ServerClock
from tests.support.lambdas import FakeContext, LogCapture
from tests.support.recording_store import RecordingStore

DECLARED = {ENV_BUCKET: "jobs", ENV_LIMITS: '{"concurrency":1}'}


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"doubled": payload["n"] * 2}


def test_given_every_slot_taken_when_the_worker_lambda_is_invoked_then_it_returns_after_2_requests(
    log_capture: LogCapture,
) -> None:
    store = RecordingStore()
    queue = Pail(store, shards=1, reclaim=False)
    queue.set_limit(1)
    running = [queue.enqueue({"n": n}) for n in range(3)]
    held = queue.claim()  # another worker runs one: the only slot is taken
    assert held is not None and held.id in running
    clock = ManualClock()
    worker = Pail(store, shards=1, reclaim=False, clock=clock)
    handler = lambda_worker(double, pail=worker, logger=log_capture.logger, env=DECLARED)
    assert queue.flush()  # the claim's read ahead lands now, not among the Lambda's requests
    store.clear()

    summary = handler({}, FakeContext(remaining=900))

    assert (summary["processed"], summary["stop_reason"]) == (0, "limited")
    assert len(store.calls) <= 2, store.calls
    assert Counter(op for op, _ in store.calls) == {"get": 1, "list": 1}
    assert held.complete({"ok": True}) and queue.flush()  # its slot's give-back has landed
    clock.advance(2)  # past the moment it marked the queue full (limits.gate.FULL_FOR)
    resumed = handler({}, FakeContext(remaining=900))
    assert resumed["processed"] >= 1  # a slot free again: it claims


def test_given_a_full_rate_window_when_the_worker_lambda_is_invoked_then_it_returns_after_2_requests(
    log_capture: LogCapture,
) -> None:
    server = ServerClock()
    store = RecordingStore(now=server)
    clock = ManualClock(wall=server())
    producer = Pail(store, shards=1, reclaim=False, clock=clock)
    producer.set_rate(Rate(1, 60))
    for n in range(2):
        producer.enqueue({"n": n})
    assert producer.work_once(double)  # the window's one start
    assert producer.flush()  # its lease removal lands now, not among the Lambda's requests
    env = {ENV_BUCKET: "jobs", ENV_LIMITS: '{"rate":{"queue":{"max":1,"per":60}}}'}
    handler = lambda_worker(
        double,
        pail=Pail(store, shards=1, reclaim=False, clock=ManualClock(wall=server())),
        logger=log_capture.logger,
        env=env,
    )
    store.clear()

    summary = handler({}, FakeContext(remaining=900))

    assert (summary["processed"], summary["stop_reason"]) == (0, "limited")
    assert Counter(op for op, _ in store.calls) == {"get": 1, "list": 1}


def test_given_a_queue_without_limits_when_the_worker_lambda_is_invoked_then_no_look_first(
    log_capture: LogCapture,
) -> None:
    store = RecordingStore()
    queue = Pail(store, shards=1, reclaim=False)
    queue.enqueue({"n": 1})
    handler = lambda_worker(
        double,
        pail=Pail(store, shards=1, reclaim=False),
        logger=log_capture.logger,
        env={ENV_BUCKET: "jobs"},
    )
    store.clear()

    summary = handler({}, FakeContext(remaining=900))

    assert summary["processed"] == 1
    assert store.calls[0][0] == "list"  # the claim's listing first: nothing looked at before


def test_given_every_slot_taken_when_work_once_then_it_stops_as_limited() -> None:
    store = RecordingStore()
    queue = Pail(store, shards=1, reclaim=False)
    queue.set_limit(1)
    queue.enqueue({"n": 1})
    queue.enqueue({"n": 2})
    held = queue.claim()
    assert held is not None
    other = Pail(store, shards=1, reclaim=False)

    assert other.work_once(double) is False
    assert other.claims_limited_for() is not None


def test_given_a_rate_of_2_a_minute_when_work_claims_then_the_third_start_waits_for_the_next_window() -> (
    None
):
    server = ServerClock()
    store = RecordingStore(now=server)
    clock = ManualClock(wall=server())
    queue = Pail(store, shards=1, reclaim=False, clock=clock)
    queue.set_rate("2/min")
    for n in range(3):
        queue.enqueue({"n": n})

    assert queue.work_once(double) and queue.work_once(double)
    assert queue.work_once(double) is False  # the window's 2 starts are taken
    server.advance(61)  # the next window, and past the refused taker's jitter
    clock.advance(61)
    assert queue.work_once(double)
    assert queue.stats().pending == 0


class StoppingClock(ManualClock):
    """A manual clock that sets ``stop`` once ``until`` simulated seconds have passed."""

    def __init__(self, until: float, stop: threading.Event) -> None:
        super().__init__()
        self._until = until
        self._stop = stop

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        super().sleep(seconds, wake)
        if self.monotonic() >= self._until:
            self._stop.set()


def test_given_every_slot_taken_when_work_polls_then_it_backs_off_to_a_few_requests_a_minute() -> (
    None
):
    store = RecordingStore()
    queue = Pail(store, shards=1, reclaim=False)
    queue.set_limit(1)
    for n in range(3):
        queue.enqueue({"n": n})
    held = queue.claim()
    assert held is not None
    stop = threading.Event()
    minutes = 10
    worker = Pail(store, shards=1, reclaim=False, clock=StoppingClock(minutes * 60.0, stop))
    assert queue.flush()
    store.clear()

    processed = worker.work(double, poll_interval=20, stop=stop)

    per_minute = len(store.calls) / minutes
    print(
        f"a worker blocked at the limit: {per_minute:.1f} requests a minute, {Counter(op for op, _ in store.calls)}"
    )
    assert processed == 0
    assert worker.claims_limited_for() is not None
    assert per_minute <= 15, Counter(store.calls)
