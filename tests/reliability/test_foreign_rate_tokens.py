"""Foreign bytes in rate limits' objects on the real local server: tokens and the rate section.

A token is never read (presence is the token): every hostile body at a slot
key only takes that slot, keys that are no slot are passed by, and a rate
section that does not decode limits the queue to one start a second. No
worker loop, reaper pass or sweep raises on any of them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pail import Pail
from pail.protocol.limits import rate
from pail.protocol.limits.rate import QUEUE_SCOPE, Rate
from tests.support.hostile import QUEUE_BODIES

pytestmark = pytest.mark.s3


def _noop(payload: Any) -> Any:
    return payload


def test_given_hostile_objects_under_the_rate_prefix_when_workers_start_jobs_then_they_run_and_sweep(
    pail: Pail,
) -> None:
    limit = Rate(1000, 3600)
    pail.set_rate(limit)
    window = limit.window(datetime.now(UTC))
    base = rate.window_prefix(pail.keys, QUEUE_SCOPE, limit, window)
    old = rate.window_prefix(pail.keys, QUEUE_SCOPE, limit, window - 5)
    hostile = list(QUEUE_BODIES)[:20]
    for n, body in enumerate(hostile):
        pail.store.put(f"{base}{n:04d}", body.body)  # at slot keys: each takes its slot
        pail.store.put(f"{old}{n:04d}", body.body)  # a past window's: swept
    for junk in ("folder/", "0001/nested", "abcd", "99999"):
        pail.store.put(base + junk, b"\xff")
    jobs = [pail.enqueue({"n": n}) for n in range(5)]

    worked = sum(pail.work_once(_noop) for _ in range(5))
    swept = rate.sweep(pail.store, pail.keys)

    assert worked == 5 and all(pail.result(job) == {"n": n} for n, job in enumerate(jobs))
    taken = [item.key for item in pail.store.list(base).items]
    assert len(taken) == len(hostile) + 4 + 5  # the hostile ones kept, five tokens more
    assert swept.deleted == len(hostile) and swept.foreign == 4


@pytest.mark.parametrize("section", ['"10/s"', '{"queue": {"max": 1e9, "per": 1}}', "[[[[1]]]]"])
def test_given_a_foreign_rate_section_when_workers_claim_then_one_start_a_second_and_no_error(
    pail: Pail, section: str
) -> None:
    pail.store.put(pail.keys.limits(), f'{{"v": 1, "rate": {section}}}'.encode())
    pail.enqueue({"n": 1})

    assert pail.work_once(_noop)
    assert pail.rate_limits().queue == rate.FOREIGN_RATE and pail.rate_limits().reason
