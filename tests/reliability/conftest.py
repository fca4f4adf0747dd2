"""Fixtures for the reliability suite: pail on the real local S3 server, and a foreign writer.

The foreign writer is a plain boto3 client: it puts bytes where it likes,
with no pail metadata, as pailq 0.1.1, a script or the S3 console would.
"""

from __future__ import annotations

from typing import Protocol

import pytest

from pail.local import LocalS3
from tests.support.queues import make_client


class Foreign(Protocol):
    def __call__(
        self, key: str, body: bytes, *, metadata: dict[str, str] | None = None
    ) -> None: ...


@pytest.fixture
def foreign(s3_server: LocalS3, bucket: str) -> Foreign:
    """``foreign(key, body)``: PUT raw bytes as another writer would (no condition, no pail metadata)."""
    client = make_client(s3_server)

    def put(key: str, body: bytes, *, metadata: dict[str, str] | None = None) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata or {})

    return put
