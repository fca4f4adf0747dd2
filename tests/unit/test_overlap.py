"""The overlap pool (``pail.protocol.overlap``): answers, bounds, background retries, flush.

The order it gives a job's requests is checked on the real server in
``tests/integration/test_overlap.py`` and under faults in ``tests/simulation``.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest

from pail import Pail
from pail.clock import ManualClock
from pail.errors import StorageError
from pail.keys import RUN
from pail.protocol.overlap import LATER_TRIES, Threads
from pail.store.memory import MemoryStore

WAIT = 10.0
"""Bound on every wait for another thread: only reached when a test fails."""


def test_given_two_calls_when_both_then_each_answer_is_kept_and_an_error_is_raised_on_get() -> None:
    overlap = Threads(2)

    def boom() -> int:
        raise StorageError("503")

    ok, failed = overlap.both(lambda: 1, boom)

    assert ok.get() == 1
    with pytest.raises(StorageError, match="503"):
        failed.get()


def test_given_both_when_the_second_waits_for_the_first_then_they_ran_at_once() -> None:
    overlap = Threads(2)
    first_running = threading.Event()

    def second() -> bool:
        return first_running.wait(WAIT)  # False if the calls ran one after the other

    def first() -> str:
        first_running.set()
        return "first"

    a, b = overlap.both(first, second)

    assert (a.get(), b.get()) == ("first", True)


class WatchedSlots:
    """The pool's slots, telling when a caller found none free and began to wait."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self._slots = slots
        self.waiting = threading.Event()

    def acquire(self) -> bool:
        if not self._slots.acquire(blocking=False):
            self.waiting.set()
            self._slots.acquire()
        return True

    def release(self) -> None:
        self._slots.release()


def _caller_waited_for_a_slot(overlap: Threads, slots: WatchedSlots, bound: float) -> bool:
    """Fill the one slot, start another call; True if the caller waited for the slot."""
    overlap._slots = slots  # type: ignore[assignment]
    release = threading.Event()
    running = threading.Event()

    def hold() -> None:
        running.set()
        release.wait(WAIT)

    overlap.later("holding", hold)
    assert running.wait(WAIT)
    returned: list[bool] = []
    caller = threading.Thread(target=lambda: returned.append(bool(overlap.ahead(lambda: 1))))
    caller.start()
    try:
        # Progress, not a nap: the caller found the one slot taken and waits for it.
        waited = slots.waiting.wait(bound)
        blocked = returned == []  # it cannot get past the wait while the slot is held
    finally:
        release.set()
        caller.join(WAIT)
    assert returned == [True] and overlap.flush(WAIT)
    return waited and blocked


def test_given_a_full_pool_when_more_is_started_then_the_caller_waits_for_a_slot() -> None:
    overlap = Threads(1)

    assert _caller_waited_for_a_slot(overlap, WatchedSlots(overlap._slots), WAIT)


def test_given_a_pool_that_queues_without_bound_then_the_caller_is_not_seen_waiting() -> None:
    # Known-bad: one thread, but a hundred slots, so calls queue up and the caller goes on.
    # (The bound here only ends the wait for an event that cannot come.)
    overlap = Threads(1)

    assert not _caller_waited_for_a_slot(
        overlap, WatchedSlots(threading.BoundedSemaphore(100)), 0.5
    )


class FlakyDeletes(MemoryStore):
    """A bucket whose first ``failures`` DELETEs of a lease fail as S3 would after botocore's retries."""

    def __init__(self, failures: int, now: ManualClock) -> None:
        super().__init__("jobs", now=now.now)
        self.failures = failures
        self.deletes_of_leases = 0

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        if key.startswith(RUN):
            self.deletes_of_leases += 1
            if self.failures > 0:
                self.failures -= 1
                raise StorageError("503 SlowDown, 5 tries")
        super().delete(key, if_match=if_match)


def _queue(failures: int) -> tuple[Pail, FlakyDeletes, ManualClock]:
    clock = ManualClock(wall=datetime(2026, 1, 1, tzinfo=UTC))
    store = FlakyDeletes(failures, clock)
    return Pail(store, visibility_timeout=30, clock=clock), store, clock


def test_given_a_lease_removal_that_fails_twice_when_the_job_completes_then_it_is_retried() -> None:
    pail, store, _ = _queue(failures=LATER_TRIES - 1)
    job_id = pail.enqueue({"n": 1})

    assert pail.work_once(lambda payload: payload["n"] + 1)
    assert pail.flush(WAIT)

    assert pail.result(job_id) == 2
    assert store.deletes_of_leases == LATER_TRIES
    assert pail.stats().running == 0


def test_given_a_lease_removal_that_never_lands_then_it_is_logged_and_the_reaper_removes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pail, _, clock = _queue(failures=LATER_TRIES)
    job_id = pail.enqueue({"n": 1})

    with caplog.at_level(logging.WARNING, logger="pail"):
        assert pail.work_once(lambda payload: payload["n"] + 1)
        assert pail.flush(WAIT)

    assert pail.result(job_id) == 2  # the outcome is decided: nothing waits for the removal
    assert any("removing its lease" in r.getMessage() for r in caplog.records)
    assert pail.stats().running == 1
    clock.advance(35)  # the lease expires (by the server's clock: this bucket's is the same)
    pail.reap()
    assert pail.stats().running == 0
    assert pail.result(job_id) == 2
