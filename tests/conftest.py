"""Shared fixtures: one local S3 server per test session, a fresh bucket per test.

The server is real (moto's S3 over HTTP on 127.0.0.1, with atomic writes; see
``pail.local``). It starts once per session and stops when the session ends.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import boto3
import pytest

from pail.local import LocalS3

_bucket_numbers = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


def make_client(server: LocalS3):  # type: ignore[no-untyped-def]
    """A fresh boto3 S3 client for ``server`` (one per thread in concurrency tests)."""
    kwargs = server.connect_kwargs()
    return boto3.client(
        "s3",
        endpoint_url=kwargs["endpoint_url"],
        aws_access_key_id=kwargs["access_key_id"],
        aws_secret_access_key=kwargs["secret_access_key"],
        region_name=kwargs["region"],
    )


@pytest.fixture
def bucket(s3_server: LocalS3) -> str:
    """The name of a new, empty bucket on the local server."""
    name = f"test-{os.getpid()}-{next(_bucket_numbers)}"
    make_client(s3_server).create_bucket(Bucket=name)
    return name
