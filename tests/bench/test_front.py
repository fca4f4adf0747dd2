"""The local S3 front against the real local server: what it delays, throttles and passes on intact."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from pail_bench.front import FixedDelay, Front
from pail_bench.partitions import PartitionModel, PartitionPolicy, Rates

from pail.local import LocalS3

pytestmark = pytest.mark.s3


def _client(server: LocalS3, endpoint_url: str) -> Any:
    kw = server.connect_kwargs()
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=kw["access_key_id"],
        aws_secret_access_key=kw["secret_access_key"],
        region_name=kw["region"],
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"}, s3={"addressing_style": "path"}
        ),
    )


def test_given_a_delaying_front_when_objects_go_through_then_they_arrive_intact_and_late(
    s3_server: LocalS3, bucket: str
) -> None:
    body = bytes(range(256)) * 40
    with Front(s3_server.port, FixedDelay(0.03)) as front:
        client = _client(s3_server, front.endpoint_url)

        started = time.perf_counter()
        client.put_object(Bucket=bucket, Key="queue/a b", Body=body, IfNoneMatch="*")
        took = time.perf_counter() - started
        read = client.get_object(Bucket=bucket, Key="queue/a b")["Body"].read()
        listed = client.list_objects_v2(Bucket=bucket, Prefix="queue/")["KeyCount"]
        forwarded, delayed = front.totals()

    assert read == body and listed == 1
    assert took >= 0.03
    assert forwarded == 3 and delayed >= 3 * 0.03


def test_given_a_partition_front_when_writes_exceed_the_rate_then_503_slowdown_and_nothing_written(
    s3_server: LocalS3, bucket: str
) -> None:
    frozen = time.monotonic()
    model = PartitionModel(Rates(writes=2, reads=100), clock=lambda: frozen)
    with Front(s3_server.port, PartitionPolicy(model)) as front:
        client = _client(s3_server, front.endpoint_url)
        client.put_object(Bucket=bucket, Key="queue/1", Body=b"1")
        client.put_object(Bucket=bucket, Key="queue/2", Body=b"2")

        with pytest.raises(ClientError) as raised:
            client.put_object(Bucket=bucket, Key="queue/3", Body=b"3")
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="q")["Contents"]]
        counts = dict(front.counts)

    assert raised.value.response["Error"]["Code"] == "SlowDown"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert keys == ["queue/1", "queue/2"]  # reads have their own rate
    assert counts == {"forwarded": 3, "throttled": 1}
    (partition,) = model.partitions(bucket)
    assert partition.admitted == {"write": 2, "read": 1} and partition.throttled == {"write": 1}
