"""pailq 0.1.1's constructor, as its users wrote it: ``Pail(bucket, client)`` with their own boto3 client.

Every test here reads as 0.1.1 user code: a plain ``boto3.client("s3")`` on the
local server, the constructor, and the 0.1.1 names (``mode``,
``visibility_timeout``, ``heartbeat_interval``, ``max_retries``).
"""

from __future__ import annotations

import pytest

from pail import ConfigurationError, Mode, Pail
from pail.local import LocalS3
from tests.servers import make_s3_client


def test_given_a_boto3_client_when_constructed_as_in_0_1_1_then_jobs_round_trip(
    s3_server: LocalS3, bucket: str
) -> None:
    client = make_s3_client(s3_server.connect_kwargs())

    pail = Pail(bucket, client, visibility_timeout=30, max_retries=3)
    job_id = pail.enqueue({"report_id": "q2_revenue", "format": "pdf"})

    assert pail.work_once(lambda payload: {"url": f"reports/{payload['report_id']}.pdf"})
    assert pail.result(job_id) == {"url": "reports/q2_revenue.pdf"}


def test_given_the_0_1_1_constructor_then_its_attributes_mean_what_they_meant(
    s3_server: LocalS3, bucket: str
) -> None:
    client = make_s3_client(s3_server.connect_kwargs())

    default = Pail(bucket, client)
    tuned = Pail(bucket, client, visibility_timeout=300.0, max_retries=None)

    assert (default.visibility_timeout, default.heartbeat_interval, default.max_retries) == (
        30.0,
        10.0,
        3,
    )
    assert (tuned.visibility_timeout, tuned.heartbeat_interval, tuned.max_retries) == (
        300.0,
        100.0,
        None,
    )
    assert default.mode is Mode.STANDARD and str(default.mode) == "standard"
    assert Pail("jobs--use1-az4--x-s3", client).mode is Mode.EXPRESS


def test_given_no_client_when_constructed_then_a_clear_error_at_construction() -> None:
    with pytest.raises(ConfigurationError, match=r"needs a boto3 S3 client.*Pail\.connect"):
        Pail("jobs")


def test_given_something_else_as_client_when_constructed_then_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="must be a boto3 S3 client"):
        Pail("jobs", "not-a-client")  # type: ignore[arg-type]


def test_given_an_invalid_bucket_name_when_constructed_then_a_clear_error(
    s3_server: LocalS3,
) -> None:
    client = make_s3_client(s3_server.connect_kwargs())

    with pytest.raises(ConfigurationError, match="invalid bucket name"):
        Pail("Not A Bucket", client)


def test_given_a_store_and_a_client_when_constructed_then_a_clear_error(
    s3_server: LocalS3,
) -> None:
    from pail import MemoryStore

    client = make_s3_client(s3_server.connect_kwargs())

    with pytest.raises(ConfigurationError, match="brings its own client"):
        Pail(MemoryStore("jobs"), client)
