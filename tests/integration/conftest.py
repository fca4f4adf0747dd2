"""Fixtures for integration tests: ``Pail`` instances on the real local S3 server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pail import Pail
from pail.local import LocalS3


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str) -> Callable[..., Pail]:
    """Connect a new ``Pail`` (with its own boto3 client) to this test's bucket."""

    def _connect(**options: Any) -> Pail:
        return Pail.connect(bucket, **{**s3_server.connect_kwargs(), **options})

    return _connect


@pytest.fixture
def pail(connect: Callable[..., Pail]) -> Pail:
    return connect()
