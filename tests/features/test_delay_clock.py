"""``not_before=`` is judged by the server's clock, whatever the producer's clock says.

The producer's wall clock is its ``Pail``'s ``Clock.now`` (injected, as the
simulation injects its own); here it runs ten minutes fast or slow. The server is
the real local S3 server, whose ``Date`` decides when a job is due.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pail import JobState, Pail, SystemClock


class SkewedClock(SystemClock):
    """The real clock, with a wall clock ``minutes`` off."""

    def __init__(self, minutes: float) -> None:
        self._off = timedelta(minutes=minutes)

    def now(self) -> datetime:
        return super().now() + self._off


def producer_clock_off_by(pail: Pail, minutes: float) -> Pail:
    """A producer of ``pail``'s queue whose wall clock is ``minutes`` off."""
    return Pail(pail.store, queue=pail.keys.namespace, clock=SkewedClock(minutes))


def test_given_a_producer_ten_minutes_fast_when_not_before_is_in_five_minutes_then_it_waits(
    pail: Pail,
) -> None:
    producer = producer_clock_off_by(pail, +10)
    job_id = producer.enqueue({"n": 1}, not_before=datetime.now(UTC) + timedelta(minutes=5))
    keyed = producer.enqueue_once(
        {"n": 2}, key="report-7", not_before=datetime.now(UTC) + timedelta(minutes=5)
    )

    assert pail.claim() is None  # the server's clock says: five minutes to go
    for waiting in (job_id, keyed.id):
        status = pail.status(waiting)
        assert status is not None and status.state is JobState.PENDING


@pytest.mark.parametrize("minutes", [+10, -10], ids=["producer fast", "producer slow"])
def test_given_a_skewed_producer_when_not_before_has_passed_on_the_server_then_it_is_claimable(
    pail: Pail, minutes: float
) -> None:
    producer = producer_clock_off_by(pail, minutes)
    job_id = producer.enqueue({"n": 1}, not_before=datetime.now(UTC) - timedelta(minutes=1))

    message = pail.claim()

    assert message is not None and message.id == job_id
    assert message.complete({"ran": True})
