"""pailq 0.1.1's ``stats()``: a five-field tuple whose last field is an age, as its users read it."""

from __future__ import annotations

from datetime import timedelta

from pail import Pail
from pail.local import LocalS3
from tests.servers import make_s3_client


def test_given_an_empty_queue_when_stats_then_it_equals_the_0_1_1_empty_tuple(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = Pail(bucket, make_s3_client(s3_server.connect_kwargs()))

    assert pail.stats() == (0, 0, 0, 0, None)


def test_given_jobs_when_stats_then_they_unpack_into_five_names_with_an_age(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = Pail(bucket, make_s3_client(s3_server.connect_kwargs()), max_retries=0)
    pail.enqueue({"n": 1})
    pail.enqueue({"n": 2})
    pail.enqueue({"n": 3})
    assert pail.work_once(lambda payload: {"ok": payload["n"]})
    message = pail.claim()
    assert message is not None
    message.fail()  # no retries left: dead-lettered, 0.1.1's `failed`

    pending, running, done, failed, oldest_pending = pail.stats()

    assert (pending, running, done, failed) == (1, 0, 1, 1)
    assert isinstance(oldest_pending, timedelta)
    assert oldest_pending.total_seconds() >= 0
    assert not oldest_pending > timedelta(minutes=5)  # 0.1.1 users compare it to a timedelta
    assert pail.stats().failed == 1 and pail.stats()[3] == 1


def test_given_pail_s_extra_states_then_they_are_attributes_not_fields(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = Pail(bucket, make_s3_client(s3_server.connect_kwargs()))
    pail.enqueue({"n": 1}, delay=3600)
    pail.cancel(pail.enqueue({"n": 2}))

    stats = pail.stats()

    assert (stats.delayed, stats.cancelled, stats.oldest_pending_at) == (1, 1, None)
    assert stats._fields == ("pending", "running", "done", "failed", "oldest_pending")
    assert len(stats) == 5 and stats == (0, 0, 0, 0, None)


def test_given_a_dead_letter_when_listing_failed_jobs_then_it_is_the_one_stats_counts(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = Pail(bucket, make_s3_client(s3_server.connect_kwargs()), max_retries=0)
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None
    message.fail()

    failed = pail.jobs("failed")

    assert pail.stats().failed == 1
    assert (
        [row.job_id for row in failed.rows]
        == [job_id]
        == [r.job_id for r in pail.jobs("dead").rows]
    )
