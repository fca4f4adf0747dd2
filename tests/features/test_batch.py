"""``enqueue_many``: concurrent, bounded, ids in order, partial failures reported per item."""

from __future__ import annotations

from typing import Any

import pytest

from pail import ConfigurationError, Pail, PayloadError
from pail.errors import BatchEnqueueError
from tests.support.counting import RequestCounter


def _drain(pail: Pail) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    while (message := pail.claim()) is not None:
        seen[message.id] = message.payload
        message.complete()
    return seen


def test_given_payloads_when_enqueue_many_then_ids_are_in_order_and_each_job_has_its_payload(
    pail: Pail, counter: RequestCounter
) -> None:
    payloads = [{"n": n} for n in range(40)]

    ids = pail.enqueue_many(payloads, max_workers=8)

    assert len(ids) == len(set(ids)) == 40
    assert counter.total("PutObject") == 40  # one PUT per job
    assert counter.total() == 41  # and one GET of the layout marker, once per Pail
    assert _drain(pail) == dict(zip(ids, payloads, strict=True))


def test_given_one_bad_payload_when_enqueue_many_then_it_is_reported_and_the_others_are_enqueued(
    pail: Pail,
) -> None:
    payloads: list[Any] = [{"n": 0}, {"n": 1}, {"bad": object()}, {"n": 3}]

    with pytest.raises(BatchEnqueueError) as caught:
        pail.enqueue_many(payloads, max_workers=2)

    error = caught.value
    assert error.failed_indices == [2]
    assert isinstance(error.errors[2], PayloadError)
    assert error.ids[2] is None
    enqueued = [job_id for job_id in error.ids if job_id is not None]
    assert _drain(pail) == {error.ids[i]: payloads[i] for i in (0, 1, 3)}
    assert len(enqueued) == 3


def test_given_no_payloads_when_enqueue_many_then_nothing_is_sent(
    pail: Pail, counter: RequestCounter
) -> None:
    assert pail.enqueue_many([]) == []
    assert counter.total() == 0


def test_given_zero_workers_when_enqueue_many_then_configuration_error(pail: Pail) -> None:
    with pytest.raises(ConfigurationError):
        pail.enqueue_many([{"n": 1}], max_workers=0)
