"""Delayed jobs: not claimable before their time, no extra request while they wait."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from pail import ConfigurationError, JobState, Pail
from pail.clock import SystemClock
from pail.codec import META_WRITE, Envelope
from pail.keys import QUEUE
from pail.protocol import delay
from pail.protocol.claim import Claimer
from tests.support.counting import RequestCounter
from tests.support.hooked_store import HookedStore, SimulatedCrash
from tests.support.waiting import wait_until


def _write_due_entry(pail: Pail, job_id: str, payload: object, due: datetime) -> str:
    """A delayed entry as ``enqueue(delay=...)`` writes it, with a due time of our choosing."""
    envelope = Envelope(payload=payload, enqueued_at=datetime.now(UTC).isoformat())
    key = delay.delayed_key(pail.keys, due, job_id)
    pail.store.put(
        key, envelope.encode(), if_none_match=True, metadata={META_WRITE: envelope.write}
    )
    return key


def test_given_delayed_job_when_claiming_before_its_time_then_none_and_no_extra_request(
    pail: Pail, counter: RequestCounter
) -> None:
    job_id = pail.enqueue({"report": "q2"}, delay=3600)
    before = counter.total()

    assert pail.claim() is None

    # The one LIST a claim of an empty queue makes, and the LISTs of run/ and wait/ of the
    # first claim's reclaim pass (pail.protocol.reclaim; the next is a visibility timeout away).
    assert counter.total() - before == 1 + 2
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert (pail.stats().pending, pail.stats().delayed) == (0, 1)  # not claimable yet


def test_given_due_delayed_entry_when_working_then_it_runs_once_at_its_measured_cost(
    pail: Pail, counter: RequestCounter
) -> None:
    job_id = "01J00000000000000000000001"
    _write_due_entry(pail, job_id, {"n": 1}, datetime.now(UTC) - timedelta(seconds=1))
    before = counter.total()
    seen: list[object] = []

    assert pail.work_once(seen.append) is True
    pail.flush()  # the lease's removal, which work_once leaves in flight, is counted too

    assert seen == [{"n": 1}]
    # LIST, promotion (GET, PUT, DELETE), the refill's pause check (HEAD), claim (GET, PUT,
    # DELETE, HEAD), complete (PUT, DELETE), the first claim's reclaim pass (LISTs of run/
    # and wait/), and the first refill's read of the limits (GET: once per worker per
    # limits.gate.REFRESH)
    assert counter.total() - before == 11 + 2 + 1
    assert pail.result(job_id) == {}
    assert pail.stats().pending == 0


def test_given_one_second_delay_when_polling_then_it_runs_only_after_its_time(
    pail: Pail,
) -> None:
    enqueued = datetime.now(UTC)
    job_id = pail.enqueue({"n": 1}, delay=1.0)
    (entry,) = pail.store.list(pail.keys.prefix(QUEUE)).items
    parsed = delay.parse(pail.keys, entry.key)
    assert parsed is not None and parsed[1] == job_id
    due = datetime.fromtimestamp(parsed[0] / 1000, UTC)
    ran_at: list[datetime] = []
    late: list[datetime] = []

    def handler(payload: object) -> str:
        ran_at.append(datetime.now(UTC))
        return "ok"

    def poll() -> bool:
        # The server's clock before this claim: once it says "due" (past rounding), the
        # claim must run the job. Late is judged by that, never by how long polling took.
        server_now = pail.store.list(pail.keys.prefix(QUEUE)).server_time
        ran = pail.work_once(handler)
        if not ran and server_now >= due + timedelta(seconds=1):
            late.append(server_now)
        return ran

    assert pail.work_once(handler) is False  # not before its time
    wait_until(poll, timeout=60, what="the delayed job to run")

    assert pail.result(job_id) == "ok"
    # Judged by the listing's Date, which S3 truncates to the second: never early.
    assert ran_at[0] - enqueued >= timedelta(seconds=1)
    assert late == [], f"due at {due}, not claimed by the claims at {late}"


def test_given_not_before_in_the_past_when_enqueued_then_claimable_at_once(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1}, not_before=datetime.now(UTC) - timedelta(minutes=1))

    message = pail.claim()

    assert message is not None and message.id == job_id
    message.complete()


def test_given_page_full_of_waiting_jobs_when_claiming_then_the_ready_job_is_claimed(
    pail: Pail,
) -> None:
    for _ in range(3):
        pail.enqueue({"later": True}, delay=3600)
    ready = pail.enqueue({"now": True})
    claimer = Claimer(
        pail.store, pail.keys, visibility_timeout=30, clock=SystemClock(), owner="t", page_size=3
    )

    lease = claimer.claim()

    assert lease is not None and lease.job_id == ready
    assert claimer.lists == 2  # the page of waiting entries, then one past them


def test_given_delayed_job_when_cancelled_then_it_never_runs(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1}, delay=3600)

    assert pail.cancel(job_id) is True

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.stats().pending == 0


def test_given_key_and_delay_when_enqueued_twice_then_one_delayed_job(pail: Pail) -> None:
    first = pail.enqueue_once({"n": 1}, key="k", delay=3600)
    again = pail.enqueue_once({"n": 1}, key="k", delay=3600)

    assert first.created and not again.created and again.id == first.id
    assert (pail.stats().pending, pail.stats().delayed) == (0, 1)
    assert pail.claim() is None


def test_given_promotion_that_crashed_before_its_delete_when_claiming_again_then_the_job_runs_once(
    pail: Pail, hooked: HookedStore
) -> None:
    job_id = "01J00000000000000000000002"
    key = _write_due_entry(pail, job_id, {"n": 2}, datetime.now(UTC) - timedelta(seconds=1))

    def crash() -> None:
        raise SimulatedCrash

    hooked.before("delete", key, crash)
    with pytest.raises(SimulatedCrash):
        Pail(hooked).claim()
    runs: list[object] = []

    while pail.work_once(runs.append):
        pass

    assert runs == [{"n": 2}]
    assert pail.stats().pending == 0 and pail.store.head(key) is None


@pytest.mark.parametrize(
    "options",
    [
        {"delay": -1},
        {"delay": 5, "not_before": datetime.now(UTC)},
        {"not_before": datetime(2030, 1, 1)},  # naive: whose clock?
    ],
)
def test_given_bad_delay_when_enqueued_then_configuration_error_and_nothing_written(
    pail: Pail, options: dict[str, object], counter: RequestCounter
) -> None:
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 1}, **options)  # type: ignore[arg-type]
    assert counter.total() == 0


def test_given_namespaced_queues_when_delayed_then_isolated(connect: Callable[..., Pail]) -> None:
    reports, emails = connect(queue="reports"), connect(queue="emails")
    job_id = reports.enqueue({"n": 1}, delay=3600)

    assert emails.status(job_id) is None
    status = reports.status(job_id)
    assert status is not None and status.state is JobState.PENDING


def test_given_job_waiting_for_its_delay_when_measuring_depth_then_it_is_not_old(
    pail: Pail,
) -> None:
    from pail.depth import measure_depth

    pail.enqueue({"n": 1}, delay=3600)

    depth = measure_depth(pail.store, pail.keys)

    # Counted as pail stats counts it: delayed, not pending, so nothing has waited too long.
    assert (depth.pending, depth.delayed) == (0, 1)
    assert depth.oldest_pending_age is None
