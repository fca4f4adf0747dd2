"""``cancel``: a pending job never runs, a running one learns at its next heartbeat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pail import JobNotFoundError, JobState, LeaseLostError, Pail
from pail.codec import Envelope
from pail.ids import new_token
from pail.local import LocalS3
from tests.support.counting import RequestCounter
from tests.support.hooked_store import HookedStore, SimulatedCrash
from tests.support.waiting import wait_until


def _never(payload: object) -> object:
    raise AssertionError(f"a cancelled job ran: {payload!r}")


def test_given_pending_job_when_cancelled_then_it_never_runs_and_status_is_cancelled(
    pail: Pail, counter: RequestCounter
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    before = counter.total()

    assert pail.cancel(job_id) is True

    assert counter.total() - before == 4  # GET entry, PUT mark, PUT done marker, DELETE entry
    assert pail.work_once(_never) is False
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.result(job_id) is None
    assert pail.stats().pending == 0


def test_given_cancelled_job_when_cancelled_again_then_true_and_nothing_changes(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    pail.cancel(job_id)

    assert pail.cancel(job_id) is True
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED


def test_given_running_job_when_cancelled_then_its_next_renewal_fails_and_result_is_dropped(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    message = pail.claim()
    assert message is not None
    cancelled_before = message.cancelled

    assert pail.cancel(job_id) is True

    assert cancelled_before is False
    with pytest.raises(LeaseLostError):
        message.lease.renew()  # what the heartbeat does at its next tick
    assert message.lease_lost and message.cancelled
    assert message.complete({"url": "late"}) is False
    assert pail.result(job_id) is None
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.stats().running == 0


def test_given_running_job_when_cancelled_then_the_heartbeat_tells_the_handler(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(visibility_timeout=0.6)  # a heartbeat every 0.2 s
    job_id = pail.enqueue({"report": "q2"})
    message = pail.claim()
    assert message is not None

    pail.cancel(job_id)

    wait_until(lambda: message.lease_lost, 10, what="the heartbeat to see the cancellation")
    assert message.cancelled
    assert message.fail("stopped: cancelled") is None  # nothing is written for it
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED


def test_given_finished_job_when_cancelled_then_false_and_result_stays(pail: Pail) -> None:
    job_id = pail.enqueue({"report": "q2"})
    pail.work_once(lambda payload: {"ok": True})
    pail.flush()  # finished: its lease's removal landed too

    assert pail.cancel(job_id) is False
    assert pail.result(job_id) == {"ok": True}


def test_given_unknown_job_when_cancelled_then_job_not_found(pail: Pail) -> None:
    with pytest.raises(JobNotFoundError):
        pail.cancel("01J00000000000000000000000")


def test_given_cancel_that_crashed_after_marking_when_a_worker_claims_then_it_finishes_it(
    pail: Pail, hooked: HookedStore
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    canceller = Pail(hooked)

    def crash() -> None:
        raise SimulatedCrash

    hooked.before("put", pail.keys.done(job_id), crash)
    with pytest.raises(SimulatedCrash):
        canceller.cancel(job_id)
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED  # the commit point

    assert pail.work_once(_never) is False

    assert pail.store.head(pail.keys.queue(job_id)) is None
    done = pail.store.head(pail.keys.done(job_id))
    assert done is not None and done.metadata.get("pail-outcome") == "cancelled"


def test_given_claim_that_read_the_entry_when_cancel_marks_it_first_then_the_job_does_not_run(
    pail: Pail, hooked: HookedStore
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    worker = Pail(hooked)

    # The claim has read the entry; before it writes its lease, the job is cancelled.
    def cancel() -> None:
        pail.cancel(job_id)

    hooked.before("put", pail.keys.run(job_id), cancel)

    assert worker.work_once(_never) is False

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.stats().running == 0 and pail.stats().pending == 0


def test_given_stale_cancelled_retry_entry_of_a_finished_job_when_claimed_then_it_is_dropped(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    pail.work_once(lambda payload: "ok")
    stale = replace(Envelope(payload={"report": "q2"}, attempts=1), cancelled=True)
    pail.store.put(pail.keys.queue(job_id), stale.encode(), metadata={"pail-write": new_token()})

    assert pail.work_once(_never) is False
    assert pail.result(job_id) == "ok"
    assert pail.stats().pending == 0


def test_given_namespaced_queue_when_cancelled_then_other_queue_is_untouched(
    s3_server: LocalS3, connect: Callable[..., Pail]
) -> None:
    reports, emails = connect(queue="reports"), connect(queue="emails")
    job_id = reports.enqueue({"n": 1})
    other = emails.enqueue({"n": 1})

    assert reports.cancel(job_id) is True
    with pytest.raises(JobNotFoundError):
        emails.cancel(job_id)
    status = emails.status(other)
    assert status is not None and status.state is JobState.PENDING
