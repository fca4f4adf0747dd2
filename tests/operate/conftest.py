"""A populated queue on the real local S3 server, for the operator reads and actions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pail import Pail
from pail.local import LocalS3
from tests.support.population import Population, populate


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str) -> Callable[..., Pail]:
    def _connect(**options: object) -> Pail:
        return Pail.connect(bucket, **{**s3_server.connect_kwargs(), **options})  # type: ignore[arg-type]

    return _connect


@pytest.fixture
def pail(connect: Callable[..., Pail]) -> Pail:
    return connect()


@pytest.fixture
def population(pail: Pail) -> Population:
    return populate(pail)
