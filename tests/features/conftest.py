"""Fixtures for the feature tests: ``Pail`` instances on the real local S3 server, counted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pail import Pail
from pail.local import LocalS3
from pail.store.client import build_client
from pail.store.s3 import S3Store
from tests.support.counting import RequestCounter
from tests.support.hooked_store import HookedStore


@pytest.fixture
def counter() -> RequestCounter:
    return RequestCounter()


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str, counter: RequestCounter) -> Callable[..., Pail]:
    """Connect a new ``Pail`` (its own boto3 client, counted by ``counter``) to this test's bucket."""

    def _connect(**options: Any) -> Pail:
        client = counter.attach(build_client(**_client_kwargs(s3_server)))
        return Pail.connect(bucket, client=client, **options)

    return _connect


@pytest.fixture
def pail(connect: Callable[..., Pail]) -> Pail:
    return connect()


@pytest.fixture
def hooked(s3_server: LocalS3, bucket: str) -> HookedStore:
    """A store on this test's bucket whose requests a test can interleave with (or crash)."""
    return HookedStore(S3Store(build_client(**_client_kwargs(s3_server)), bucket))


def _client_kwargs(server: LocalS3) -> dict[str, Any]:
    kwargs = server.connect_kwargs()
    return {
        "endpoint_url": kwargs["endpoint_url"],
        "access_key_id": kwargs["access_key_id"],
        "secret_access_key": kwargs["secret_access_key"],
        "region": kwargs["region"],
    }
