"""The backends the storage contract runs on, each test with a fresh bucket.

* ``memory``: a new ``MemoryStore``;
* ``moto``: ``S3Store`` on the session's ``LocalS3`` (moto, writes serialised);
* ``seaweed``: ``S3Store`` on the session's ``SeaweedS3`` (SeaweedFS).

A server starts only when a test of its backend first needs it, so running
``-k memory`` starts none.
"""

from __future__ import annotations

import functools
import itertools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from pail.local import LocalS3
from pail.store.base import Store
from pail.store.memory import MemoryStore
from pail.store.s3 import S3Store
from tests.servers import SeaweedS3, make_s3_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BACKENDS = (
    "memory",
    pytest.param("moto", marks=pytest.mark.s3),
    pytest.param("seaweed", marks=pytest.mark.s3),
)

_bucket_numbers = itertools.count()


@dataclass(frozen=True, slots=True)
class Backend:
    """A store under test, and the facts about its backend the contract allows to differ."""

    name: str
    store: Store
    reports_missing: bool
    """Whether ``ConditionFailedError.missing`` is True for a condition on a missing key.

    AWS and moto answer 404 NoSuchKey there; SeaweedFS answers 412 like any
    other failed condition, so the store cannot tell.
    """
    client: S3Client | None = None
    """The boto3 client behind ``store``, for the server backends."""
    race_rounds: int = 5
    """Rounds for the store-level races. SeaweedFS makes the losers of a contended
    write wait in whole seconds, so it gets one; tests/integration/
    test_server_atomicity.py races the servers themselves much harder."""

    @property
    def is_server(self) -> bool:
        return self.client is not None

    def store_for(self, bucket: str) -> Store:
        """A store of this backend on another bucket, which need not exist."""
        if self.client is None:
            return MemoryStore(bucket)
        return S3Store(self.client, bucket)


@functools.cache
def _client(connect_kwargs: tuple[tuple[str, str], ...]) -> S3Client:
    """One client per server for the session: boto3 clients are thread-safe."""
    return make_s3_client(dict(connect_kwargs))


def _new_bucket(client: S3Client) -> str:
    name = f"contract-{os.getpid()}-{next(_bucket_numbers)}"
    client.create_bucket(Bucket=name)
    return name


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each backend in turn, with a fresh, empty bucket."""
    name: str = request.param
    if name == "memory":
        return Backend(name, MemoryStore(f"memory-{next(_bucket_numbers)}"), reports_missing=True)
    server: LocalS3 | SeaweedS3 = request.getfixturevalue(
        "s3_server" if name == "moto" else "seaweed_server"
    )
    client = _client(tuple(sorted(server.connect_kwargs().items())))
    store = S3Store(client, _new_bucket(client))
    if name == "moto":
        return Backend(name, store, reports_missing=True, client=client)
    return Backend(name, store, reports_missing=False, client=client, race_rounds=1)


@pytest.fixture
def store(backend: Backend) -> Store:
    """The store under test (see ``backend``)."""
    return backend.store
