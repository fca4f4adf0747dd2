"""Operator actions over a real server: purge, and deleting one dead letter.

Purge cancels pending jobs through the cancel transition; the interleaving
tests pin the moment a worker claims a job between the purge's listing and
its write (``HookedStore``), which must leave that job running untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pail import JobState, Pail, SystemClock
from pail.errors import JobNotFoundError
from pail.operate import purge as purge_module
from pail.protocol.claim import Claimer
from tests.support.hooked_store import HookedStore
from tests.support.population import GARBAGE_ID, Population

pytestmark = pytest.mark.s3


def _boom(payload: Any) -> Any:
    raise RuntimeError("poison")


def test_given_every_state_when_purge_then_pending_and_delayed_end_cancelled_and_nothing_else_moves(
    pail: Pail, population: Population
) -> None:
    report = pail.purge()

    waiting = [*population.pending, population.retrying, population.delayed]
    assert sorted(report.cancelled) == sorted(waiting)
    assert report.complete and not report.skipped
    assert set(report.foreign) == {pail.keys.prefix("queue/"), "queue/photos/cat.jpg"}
    for job_id in waiting:
        status = pail.status(job_id)
        assert status is not None and status.state is JobState.CANCELLED
    running = pail.status(population.running)
    assert running is not None and running.state is JobState.RUNNING
    assert pail.jobs("pending").rows == tuple(
        row for row in pail.jobs("pending").rows if row.foreign
    )
    assert {row.job_id for row in pail.jobs("done").rows} >= set(population.done)
    assert not pail.work_once(lambda payload: payload)  # nothing left to run


def test_given_a_limit_when_purge_then_stops_there_and_says_so(pail: Pail) -> None:
    ids = pail.enqueue_many([{"n": n} for n in range(3)])

    report = pail.purge(limit=2)

    assert report.cancelled == ids[:2] and not report.complete
    status = pail.status(ids[2])
    assert status is not None and status.state is JobState.PENDING


def test_given_a_job_claimed_after_the_purge_listed_it_when_purge_then_it_keeps_running(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"n": 1})
    hooked = HookedStore(pail.store)
    claimer = Claimer(
        pail.store, pail.keys, visibility_timeout=3600, clock=SystemClock(), owner="w:1"
    )
    claimed: list[Any] = []
    # Between the purge's listing and its GET of the entry, a worker claims the job.
    hooked.before("get", pail.keys.queue(job_id), lambda: claimed.append(claimer.claim()))

    report = purge_module.purge(hooked, pail.keys)

    assert claimed and claimed[0] is not None
    assert report.skipped == [job_id] and report.cancelled == []
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.RUNNING


def test_given_a_worker_mid_claim_when_purge_cancels_then_the_worker_drops_the_job(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"n": 1})
    hooked = HookedStore(pail.store)
    claimer = Claimer(hooked, pail.keys, visibility_timeout=3600, clock=SystemClock(), owner="w:1")
    # The worker has read the entry and written its lease (claim steps 1-2);
    # the purge cancels before the worker's conditional delete (step 3).
    purged: list[Any] = []
    hooked.before("delete", pail.keys.queue(job_id), lambda: purged.append(pail.purge()))

    lease = claimer.claim()

    assert lease is None  # the entry changed under the worker: it does not run the job
    assert purged[0].cancelled == [job_id]
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.store.head(pail.keys.run(job_id)) is None


def test_given_a_dead_letter_when_deleted_then_the_job_stays_failed_and_never_runs(
    connect: Callable[..., Pail],
) -> None:
    strict: Pail = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(_boom)
    inspected = strict.store.head(strict.keys.dlq(job_id))
    assert inspected is not None

    assert strict.delete_dead_letter(job_id, etag=inspected.etag)

    assert strict.store.head(strict.keys.dlq(job_id)) is None
    status = strict.status(job_id)
    assert status is not None and status.state is JobState.FAILED
    assert strict.result(job_id) is None
    assert strict.redrive(job_id) == []  # nothing left to redrive
    assert all(row.job_id != job_id for row in strict.jobs("dead").rows)
    # A stale entry of the job (a zombie's late retry) still meets the marker.
    strict.store.put(strict.keys.queue(job_id), b'{"payload": {"n": 1}, "attempts": 1}')
    ran: list[Any] = []
    strict.work_once(ran.append)
    assert ran == []


def test_given_a_dead_letter_redriven_and_dead_again_when_deleting_the_inspected_one_then_refused(
    connect: Callable[..., Pail],
) -> None:
    strict: Pail = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(_boom)
    inspected = strict.store.head(strict.keys.dlq(job_id))
    assert inspected is not None
    strict.redrive(job_id)
    strict.work_once(_boom)

    assert strict.delete_dead_letter(job_id, etag=inspected.etag) is False
    assert strict.store.head(strict.keys.dlq(job_id)) is not None


def test_given_no_dead_letter_when_deleting_then_not_found(pail: Pail) -> None:
    with pytest.raises(JobNotFoundError):
        pail.delete_dead_letter("01J0000000000000000000000A")


def test_given_an_unreadable_dead_letter_when_deleted_then_it_goes(
    pail: Pail, population: Population
) -> None:
    assert pail.delete_dead_letter(GARBAGE_ID)
    assert pail.store.head(pail.keys.dlq(GARBAGE_ID)) is None
