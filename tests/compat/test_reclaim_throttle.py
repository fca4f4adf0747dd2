"""The claims' own reclaim pass: at most one per visibility timeout, never a LIST of run/ per claim.

In memory with a manual clock: the throttle is a matter of the clock, not of the
server. (The real-server proof that workers alone recover a killed worker's job
is ``test_dead_worker.py``.)
"""

from __future__ import annotations

import threading

import pytest

from pail import ManualClock, MemoryStore, Pail, StorageError
from pail.config import ENV_RECLAIM
from pail.protocol.claim import Claimer
from tests.support.clocks import ServerClock
from tests.support.recording_store import RecordingStore

VT = 30.0


class StillClock(ManualClock):
    """A manual clock whose ``sleep`` does not move it: a heartbeat waits for its stop, unmoved."""

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if wake is not None:
            wake.wait(seconds)


def _run_lists(store: RecordingStore) -> int:
    return sum(1 for op, key in store.calls if op == "list" and key.startswith("run/"))


def _queue(store: RecordingStore, clock: ManualClock, **options: object) -> Pail:
    return Pail(store, visibility_timeout=VT, clock=clock, shards=1, **options)  # type: ignore[arg-type]


def test_given_many_claims_within_one_timeout_then_one_reclaim_pass_and_the_next_a_timeout_later() -> (
    None
):
    store, clock = RecordingStore(), StillClock()
    pail = _queue(store, clock)

    polls = [pail.claim() for _ in range(100)]

    assert polls == [None] * 100
    assert _run_lists(store) == 1  # the first claim's pass; the other 99 read only the clock
    clock.advance(VT - 0.001)
    assert pail.claim() is None and _run_lists(store) == 1
    clock.advance(0.001)
    assert pail.claim() is None and _run_lists(store) == 2
    assert pail.last_reclaim is not None


def test_given_reclaim_off_by_argument_or_environment_then_claims_never_list_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, clock = RecordingStore(), StillClock()
    off = _queue(store, clock, reclaim=False)
    monkeypatch.setenv(ENV_RECLAIM, "false")
    off_by_env = _queue(store, clock)
    monkeypatch.setenv(ENV_RECLAIM, "false")
    on_anyway = _queue(store, clock, reclaim=True)  # the argument beats the environment

    for _ in range(3):
        assert off.claim() is None and off_by_env.claim() is None
        clock.advance(VT)

    assert (off.reclaims, off_by_env.reclaims, on_anyway.reclaims) == (False, False, True)
    assert _run_lists(store) == 0 and off.last_reclaim is None


def test_given_reclaim_off_when_reclaim_is_called_then_it_passes_now() -> None:
    store, clock = RecordingStore(), StillClock()
    pail = _queue(store, clock, reclaim=False)

    report = pail.reclaim()
    again = pail.reclaim()  # the user's call is never throttled

    assert report.scanned == again.scanned == 0 and _run_lists(store) == 2
    assert pail.last_reclaim == clock.now()


def test_given_a_pass_that_fails_when_claiming_then_the_claim_goes_on_and_the_next_pass_waits() -> (
    None
):
    class RunUnlistable(RecordingStore):
        def list(self, prefix: str, **kwargs: object) -> object:  # type: ignore[override]
            if prefix.startswith("run/"):
                self._record("list", prefix)
                raise StorageError("s3:ListBucket on run/ refused")
            return super().list(prefix, **kwargs)  # type: ignore[arg-type]

    store, clock = RunUnlistable(), StillClock()
    pail = _queue(store, clock)
    job_id = pail.enqueue({"n": 1})

    message = pail.claim()
    assert message is not None and message.id == job_id  # the failed pass did not fail it
    message.complete({"ok": True})
    polls = [pail.claim() for _ in range(10)]

    assert polls == [None] * 10
    assert _run_lists(store) == 1  # an outage costs one LIST per timeout, not one per claim
    with pytest.raises(StorageError):
        pail.reclaim()  # the user's own call says so


def test_given_a_dead_worker_s_lease_when_a_timeout_later_a_worker_claims_then_it_gets_the_job_again() -> (
    None
):
    server, clock = ServerClock(), StillClock()
    store = MemoryStore("jobs", now=server)
    pail = _queue(store, clock)  # type: ignore[arg-type]
    job_id = pail.enqueue({"n": 1})
    dead = Claimer(store, pail.keys, visibility_timeout=VT, clock=clock, owner="dead")
    assert dead.claim() is not None  # its worker dies now: the lease is never renewed
    assert pail.claim() is None  # this claim's pass finds the lease alive

    server.advance(VT + 2)  # past the timeout and the second of clock resolution
    clock.advance(VT)  # the next pass is due
    again = pail.claim()

    assert again is not None and again.id == job_id and again.attempt == 2
    again.complete({"ok": True})
    assert pail.result(job_id) == {"ok": True}
