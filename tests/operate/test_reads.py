"""Operator reads over a real server: counts by state, jobs by state, failures, queues.

The queue holds jobs in every state and foreign objects in every prefix
(``tests/support/population.py``); every read must show both, and never raise.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pail import Pail
from pail.local import LocalS3
from pail.operate.failures import recent_failures
from pail.operate.jobs import list_jobs
from pail.operate.objects import FOREIGN, JobKind, Reader
from pail.operate.snapshot import take_snapshot
from pail.store.base import Store
from tests.support.counting import RequestCounter
from tests.support.population import GARBAGE_ID, HOLDER, HTML_ID, NAN_ID, Population, populate

pytestmark = pytest.mark.s3


def test_given_every_state_when_census_then_each_state_counted_exactly(
    pail: Pail, population: Population
) -> None:
    census = take_snapshot(pail.store, pail.keys, Reader(pail.store)).census

    # pending: two plain jobs and the retry; dead: the poison job and the three
    # foreign records with job-like names; running: the lease and pailq's NaN lease.
    assert (census.pending.value, census.delayed.value, census.running.value) == (3, 1, 2)
    assert (census.done.value, census.failed.value, census.cancelled.value) == (2, 4, 1)
    assert census.foreign.value == 5  # the 4 folder markers and queue/photos/cat.jpg
    assert all(
        count.exact for count in (census.pending, census.done, census.cancelled, census.foreign)
    )
    assert census.oldest_pending_age is not None and census.oldest_pending_age >= 0


def test_given_more_keys_than_a_page_when_census_then_the_count_is_a_lower_bound(
    pail: Pail,
) -> None:
    pail.enqueue_many([{"n": n} for n in range(5)])

    snapshot = take_snapshot(pail.store, pail.keys, Reader(pail.store), max_pages=1)
    small = take_snapshot(pail.store, pail.keys, Reader(pail.store), page_size=2).census

    assert snapshot.census.pending.exact and snapshot.census.pending.value == 5
    assert not small.pending.exact and small.pending.value == 2
    assert str(small.pending) == "≥2"


def test_given_running_job_when_listing_running_then_holder_attempt_progress_and_renewal_show(
    pail: Pail, population: Population
) -> None:
    page = pail.jobs("running")

    rows = {row.job_id: row for row in page.rows}
    lease = rows[population.running]
    assert lease.detail is not None
    assert (lease.detail.holder, lease.detail.attempts) == (HOLDER, 1)
    assert lease.detail.progress == {"done": 3, "total": 8, "message": "rendering charts"}
    assert lease.age is not None and lease.in_state >= 0
    nan = rows[NAN_ID]
    assert nan.detail is not None and nan.detail.unreadable  # pailq's NaN lease: shown, not raised
    assert any(row.state == FOREIGN and row.key == pail.keys.prefix("run/") for row in page.rows)


def test_given_every_state_when_listing_each_state_then_each_job_is_where_it_belongs(
    pail: Pail, population: Population
) -> None:
    ids = {kind: {row.job_id for row in pail.jobs(kind).rows} for kind in JobKind}

    assert set(population.pending) | {population.retrying} <= ids[JobKind.PENDING]
    assert ids[JobKind.DELAYED] == {population.delayed}
    assert set(population.done) <= ids[JobKind.DONE]
    assert ids[JobKind.CANCELLED] == {population.cancelled}
    assert {population.dead, NAN_ID, GARBAGE_ID, HTML_ID} <= ids[JobKind.DEAD]
    assert population.cancelled not in ids[JobKind.DONE]
    assert population.dead not in ids[JobKind.DONE]  # its dead marker is not a success


def test_given_a_limit_when_listing_then_pages_follow_on_without_overlap(pail: Pail) -> None:
    ids = pail.enqueue_many([{"n": n} for n in range(5)])

    first = pail.jobs("pending", limit=2)
    second = pail.jobs("pending", limit=2, after=first.next_after)
    third = pail.jobs("pending", limit=2, after=second.next_after)

    assert first.more and second.more and not third.more
    listed = [row.job_id for page in (first, second, third) for row in page.rows]
    assert listed == ids


def test_given_failures_when_recent_failures_then_dead_letters_and_retries_show_their_errors(
    pail: Pail, population: Population
) -> None:
    reader = Reader(pail.store)
    failures = recent_failures(take_snapshot(pail.store, pail.keys, reader), reader, limit=20)

    by_id = {(f.row.job_id, f.dead): f for f in failures}
    dead = by_id[(population.dead, True)]
    assert dead.error is not None and "q3-poison failed" in dead.error.message
    retry = by_id[(population.retrying, False)]
    assert retry.error is not None and "q6-flaky failed" in retry.error.message
    assert by_id[(GARBAGE_ID, True)].error is not None  # unreadable, shown as such
    times = [f.at for f in failures]
    assert times == sorted(times, reverse=True)


def test_given_a_cached_reader_when_refreshing_an_idle_queue_then_only_lists_are_sent(
    s3_server: LocalS3, bucket: str
) -> None:
    counter = RequestCounter()
    counted = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    counter.attach(counted.store.client)  # type: ignore[attr-defined]
    populate(counted)
    reader = Reader(counted.store)
    first = take_snapshot(counted.store, counted.keys, reader)
    recent_failures(first, reader)
    before = dict(counter.calls)

    again = take_snapshot(counted.store, counted.keys, reader)
    recent_failures(again, reader)

    sent = {op: n - before.get(op, 0) for op, n in counter.calls.items() if n != before.get(op, 0)}
    assert sent == {
        ("ListObjectsV2", 200): 5
    }  # the 5 prefixes (wait/ too); every body and outcome cached


def test_given_namespaces_and_foreign_folders_when_list_queues_then_queues_and_foreign_apart(
    connect: Callable[..., Pail],
) -> None:
    default: Pail = connect()
    default.enqueue({"n": 1})
    connect(queue="reports").enqueue({"n": 2})
    connect(queue="emails").work_once(lambda payload: None)  # a queue with nothing at all: absent
    store: Store = default.store
    store.put("photos/cat.jpg", b"\x89PNG")
    store.put("README.txt", b"hello")
    store.put("Not A Namespace/queue/x", b"{}")

    found = default.queues()

    assert found.queues == ("", "reports")
    assert set(found.foreign) == {"photos/", "README.txt", "Not A Namespace/"}
    assert found.exact


def test_given_an_empty_bucket_when_list_queues_then_none(pail: Pail) -> None:
    assert pail.queues().queues == ()


def test_given_an_unknown_state_when_jobs_then_a_configuration_error(pail: Pail) -> None:
    from pail.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unknown job state"):
        pail.jobs("finished")


def test_given_details_off_when_listing_then_no_body_is_decoded(
    pail: Pail, population: Population
) -> None:
    page = list_jobs(pail.store, pail.keys, JobKind.RUNNING, details=False)

    assert all(row.detail is None for row in page.rows)
