"""Fixtures for the reliability suite: pail on the real local S3 server, and a foreign writer.

The foreign writer is a plain boto3 client: it puts bytes where it likes,
with no pail metadata, as pailq 0.1.1, a script or the S3 console would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pytest

from pail import Pail
from pail.local import LocalS3
from tests.cli.conftest import invoke, server_env  # noqa: F401 - the CLI fixtures, shared
from tests.conftest import make_client


class Foreign(Protocol):
    def __call__(
        self, key: str, body: bytes, *, metadata: dict[str, str] | None = None
    ) -> None: ...


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str) -> Callable[..., Pail]:
    """Connect a new ``Pail`` (with its own boto3 client) to this test's bucket."""

    def _connect(**options: Any) -> Pail:
        return Pail.connect(bucket, **{**s3_server.connect_kwargs(), **options})

    return _connect


@pytest.fixture
def pail(connect: Callable[..., Pail]) -> Pail:
    return connect()


@pytest.fixture
def foreign(s3_server: LocalS3, bucket: str) -> Foreign:
    """``foreign(key, body)``: PUT raw bytes as another writer would (no condition, no pail metadata)."""
    client = make_client(s3_server)

    def put(key: str, body: bytes, *, metadata: dict[str, str] | None = None) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata or {})

    return put
