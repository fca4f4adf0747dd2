"""The hostile reviews' protocol defects, each pinned to its interleaving on the real local server.

Issue 12 defects 3, 4 and 7 and issue 18 defect 0, in that list's words, with
the public API. A ``HookedStore`` pauses one actor just before a named
request (a stall, or, with ``SimulatedCrash``, a crash) while the test makes
the others act; waits are on conditions (the reaper reclaims once the
server's clock says the lease expired), never fixed sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from pail.store import S3Store
from tests.integration.test_protocol import VT, Executions, hooked, reap_until, s3store
from tests.support.hooked_store import HookedStore, SimulatedCrash
from tests.support.queues import connect_to
from tests.support.refusing_proxy import RefusingProxy

__all__ = ["hooked", "s3store"]  # the fixtures, shared with test_protocol


# --- issue 12, defect 3: a stalled claimer runs a job in parallel with its live owner ---


@pytest.mark.parametrize(
    ("operation", "prefix", "where"),
    [("delete", "queue/", "after its lease write"), ("head", "done/", "after deleting the entry")],
    ids=["stalled-after-step-2", "stalled-after-step-3"],
)
def test_given_claimer_stalled_past_its_lease_when_another_worker_runs_the_job_then_it_does_not_start(
    hooked: HookedStore,
    s3store: Callable[[], S3Store],
    operation: str,
    prefix: str,
    where: str,
) -> None:
    a, b = Pail(hooked, visibility_timeout=VT), Pail(s3store(), visibility_timeout=VT)
    executions = Executions()
    job_id = a.enqueue({"n": 1})
    taken_over: list[Any] = []

    # A stalls {where}, past its lease: the reaper requeues, B claims and is running.
    def take_over() -> None:
        reap_until(b, "requeued")
        owner = b.claim()
        assert owner is not None and owner.id == job_id
        taken_over.append(owner)

    hooked.before(operation, a.keys.prefix(prefix), take_over)

    assert a.work_once(executions.handler("a")) is False

    (owner,) = taken_over
    assert executions.runs == []  # A never started the handler while B's lease was live
    assert not owner.lease_lost and owner.complete({"by": "b"}) is True
    assert b.result(job_id) == {"by": "b"}


# --- issue 12, defect 4: a redrive that crashes half-way leaves a job done and dead ---


@pytest.mark.parametrize(
    ("operation", "prefix"),
    [("delete", "dlq/"), ("delete", "done/")],
    ids=["crash-after-step-1", "crash-after-step-2"],
)
def test_given_redrive_crashed_half_way_when_the_job_then_runs_then_it_is_done_and_not_dead(
    hooked: HookedStore, s3store: Callable[[], S3Store], operation: str, prefix: str
) -> None:
    dying = Pail(s3store(), visibility_timeout=30, max_retries=0)
    job_id = dying.enqueue({"n": 1})
    assert dying.work_once(_fails)
    operator, worker = Pail(hooked, visibility_timeout=30), Pail(s3store(), visibility_timeout=30)

    hooked.before(operation, operator.keys.prefix(prefix), _crash)
    with pytest.raises(SimulatedCrash):
        operator.redrive(job_id)
    status = worker.status(job_id)
    assert status is not None and status.state is JobState.PENDING  # the redrive committed

    assert worker.work_once(lambda payload: {"second": "life"})

    status = worker.status(job_id)
    assert status is not None and status.state is JobState.DONE
    assert worker.result(job_id) == {"second": "life"}
    assert worker.dead_letters() == []
    stats = worker.stats()
    assert (stats.done, stats.failed, stats.pending) == (1, 0, 0)


# --- issue 12, defect 7: a done job's status goes back to pending ---


def test_given_owner_stalled_before_its_retry_entry_when_the_job_ends_meanwhile_then_it_stays_done(
    hooked: HookedStore, s3store: Callable[[], S3Store]
) -> None:
    a = Pail(hooked, visibility_timeout=VT, max_retries=3)
    b = Pail(s3store(), visibility_timeout=VT, max_retries=3)
    job_id = a.enqueue({"n": 1})
    message = a.claim()
    assert message is not None

    # A decided to retry (its lease says so), then stalls before writing the
    # entry: the reaper finishes the retry and B runs the job to its end.
    def job_ends_meanwhile() -> None:
        reap_until(b, "requeued")
        assert b.work_once(lambda payload: {"by": "b"})
        b.flush()  # its lease is gone too (until then, a claim of the late entry misses)

    hooked.before("put", a.keys.prefix("queue/"), job_ends_meanwhile)

    assert message.fail(RuntimeError("first attempt")) is None  # its lease was taken over

    assert b.store.head(b.keys.queue(job_id)) is not None  # A's late entry did land
    status = b.status(job_id)
    assert status is not None and status.state is JobState.DONE
    assert b.stats().pending == 0
    assert b.claim() is None  # the claim that meets the late entry drops it
    assert b.store.head(b.keys.queue(job_id)) is None
    assert b.result(job_id) == {"by": "b"}


# --- issue 18, defect 0: a cancel during a redrive loses the job ---

REDRIVE_REQUESTS = [
    ("get", "dlq/"),
    ("head", "run/"),
    ("head", "done/"),
    ("put", "queue/"),
    ("delete", "dlq/"),
    ("delete", "done/"),
]
"""``Pail.redrive(id)``: each request it makes, in order."""


@pytest.mark.parametrize(
    ("operation", "prefix"), REDRIVE_REQUESTS, ids=[f"{o}-{p}" for o, p in REDRIVE_REQUESTS]
)
def test_given_cancel_during_a_redrive_step_when_both_finish_then_the_job_is_never_lost(
    hooked: HookedStore, s3store: Callable[[], S3Store], operation: str, prefix: str
) -> None:
    dying = Pail(s3store(), visibility_timeout=30, max_retries=0)
    job_id = dying.enqueue({"n": 1})
    assert dying.work_once(_fails)
    operator, canceller = Pail(hooked, visibility_timeout=30), Pail(s3store())
    cancelled: list[bool] = []

    hooked.before(
        operation, operator.keys.prefix(prefix), lambda: cancelled.append(canceller.cancel(job_id))
    )
    operator.redrive(job_id)
    while canceller.work_once(lambda payload: {"ran": True}):
        pass

    status = canceller.status(job_id)
    assert status is not None  # some object of the job is left: it was not lost
    if cancelled == [True]:
        assert status.state is JobState.CANCELLED and canceller.result(job_id) is None
    else:  # the job was dead when the cancel looked: the redrive then ran it
        assert cancelled == [False] and status.state is JobState.DONE
    assert canceller.dead_letters() == []


def test_given_cancel_while_the_redriven_owner_runs_when_the_redrive_resumes_then_the_owner_cannot_complete(
    hooked: HookedStore, s3store: Callable[[], S3Store]
) -> None:
    dying = Pail(s3store(), visibility_timeout=30, max_retries=0)
    job_id = dying.enqueue({"n": 1})
    assert dying.work_once(_fails)
    operator, other = Pail(hooked, visibility_timeout=30), Pail(s3store(), visibility_timeout=30)
    owners: list[Any] = []
    cancelled: list[bool] = []

    # The redrive has written its entry and removed the record; before it
    # deletes the dead marker, a worker claims the job and the job is cancelled.
    def owner_runs_then_cancel() -> None:
        owner = other.claim()
        assert owner is not None and owner.id == job_id
        owners.append(owner)
        cancelled.append(other.cancel(job_id))

    hooked.before("delete", operator.keys.prefix("done/"), owner_runs_then_cancel)
    operator.redrive(job_id)

    assert cancelled == [True]
    assert owners[0].complete({"finished": "anyway"}) is False
    status = other.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert other.result(job_id) is None


def _fails(payload: Any) -> Any:
    raise RuntimeError("no retries left")


def _crash() -> None:
    raise SimulatedCrash


# --- a conditional DELETE applied, its response lost, its resend answered 409 ---------


def test_given_delete_applied_then_resent_into_a_409_when_it_ends_404_then_it_counts_as_resent(
    s3_server: LocalS3, bucket: str
) -> None:
    """The claim's step 3 reads a 404 as "not ours" only on a DELETE sent once.

    ``S3Store`` retries a 409 itself: the 404 that follows is the answer to a
    new call, sent once by botocore, but the request may have been applied by
    an earlier round (its response lost). It must still say "resent".
    """
    with RefusingProxy(s3_server.endpoint_url, None, lose_then_conflict=True) as proxy:
        through = {**s3_server.connect_kwargs(), "endpoint_url": proxy.endpoint_url}
        pail = connect_to(through, bucket, visibility_timeout=30)
        job_id = pail.enqueue({"n": 1})

        message = pail.claim()  # its step 3 is that DELETE

        assert proxy.conditional_deletes >= 3  # applied and lost, 409, then the 404
        assert message is not None and message.id == job_id  # not dropped as "someone else's"
        assert message.complete({"ok": True}) is True
        assert pail.result(job_id) == {"ok": True}


# --- a dead-letter record landing after a whole redrive (its writer crashed before its check) ---


def test_given_a_record_of_a_past_life_landing_after_the_redrive_when_dead_letters_are_listed_then_it_is_removed(
    s3store: Callable[[], S3Store],
) -> None:
    queue = Pail(s3store(), visibility_timeout=30, max_retries=0)
    job_id = queue.enqueue({"n": 1})
    assert queue.work_once(_fails)
    store = queue.store
    record = store.get(queue.keys.dlq(job_id))
    assert record is not None  # the bytes a stalled writer of life 0 holds, to land late
    assert queue.redrive(job_id) == [job_id]
    assert queue.work_once(lambda payload: {"second": "life"}) and queue.flush()
    store.put(queue.keys.dlq(job_id), record.body)  # the late PUT, after the redrive's last look
    assert queue.stats().failed == 1  # what a reader saw before the listing removed it

    assert queue.dead_letters() == []

    assert store.head(queue.keys.dlq(job_id)) is None
    assert queue.result(job_id) == {"second": "life"}
    stats = queue.stats()
    assert (stats.done, stats.failed) == (1, 0)


def test_given_a_dead_job_when_dead_letters_are_listed_then_its_record_stays(
    s3store: Callable[[], S3Store],
) -> None:
    queue = Pail(s3store(), visibility_timeout=30, max_retries=0)
    job_id = queue.enqueue({"n": 1})
    assert queue.work_once(_fails)

    assert [letter.job_id for letter in queue.dead_letters()] == [job_id]
    assert [letter.job_id for letter in queue.dead_letters()] == [job_id]
    assert queue.stats().failed == 1


# --- a cancel that marks a running dependency and crashes before telling its dependent ---


def test_given_a_cancel_crashed_after_marking_a_running_dependency_when_its_retry_is_claimed_then_the_dependent_ends(
    hooked: HookedStore, s3store: Callable[[], S3Store]
) -> None:
    queue = Pail(s3store(), visibility_timeout=30, max_retries=3)
    first, second = queue.enqueue_chain([{"n": 1}, {"n": 2}])
    owner = queue.claim()
    assert owner is not None and owner.id == first  # running; its lease names the dependent
    canceller = Pail(hooked, visibility_timeout=30)
    hooked.before("get", canceller.keys.prefix("wait/"), _crash)  # the tell's first read
    with pytest.raises(SimulatedCrash):
        canceller.cancel(first)
    assert owner.fail("cut off")  # its retry entry, written before it knew: it carries the edge
    assert queue.flush()

    assert queue.claim() is None  # the claim meets the cancelled marker and drops the entry

    dependent = queue.status(second)
    assert dependent is not None and dependent.state is JobState.CANCELLED
    assert queue.store.head(queue.keys.wait(second)) is None
