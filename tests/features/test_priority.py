"""Priorities: a high-priority job is claimed before the normal backlog."""

from __future__ import annotations

import pytest

from pail import ConfigurationError, JobState, Pail
from tests.support.counting import RequestCounter


def test_given_backlog_when_a_high_priority_job_arrives_then_the_next_fresh_claim_takes_it(
    pail: Pail,
) -> None:
    backlog = [pail.enqueue({"n": n}) for n in range(5)]
    urgent = pail.enqueue({"urgent": True}, priority="high")

    message = pail.claim()

    assert message is not None and message.id == urgent
    message.complete()
    order = []
    while (next_message := pail.claim()) is not None:
        order.append(next_message.id)
        next_message.complete()
    assert order == backlog  # the rest still oldest first


def test_given_high_priority_job_when_pending_then_status_finds_it_and_cancel_works(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"urgent": True}, priority="high")

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert pail.cancel(job_id) is True
    assert pail.claim() is None


def test_given_high_priority_job_when_worked_then_it_costs_three_requests_more(
    pail: Pail, counter: RequestCounter
) -> None:
    assert pail.keys.shards == 1  # reads the layout marker: once per Pail, not per job
    pail.reclaim()  # the first claim's reclaim pass (1 LIST), once per visibility timeout
    start = counter.total()
    pail.enqueue({"n": 1})
    pail.work_once(lambda payload: "ok")
    pail.flush()  # count the lease's removal, which work_once leaves in flight
    normal = counter.total() - start
    pail.enqueue({"n": 2}, priority="high")
    pail.work_once(lambda payload: "ok")
    pail.flush()

    # The promotion: GET, PUT, DELETE; the first job's refill also read the limits (a GET,
    # once per worker per limits.gate.REFRESH), which the second's does only if 5 s passed.
    assert counter.total() - start - normal - normal in (3 - 1, 3)


def test_given_unknown_priority_when_enqueued_then_configuration_error(pail: Pail) -> None:
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 1}, priority="urgent")
