"""Fixtures for the feature tests: a store on the real local S3 server that a test can interleave with."""

from __future__ import annotations

import pytest

from pail.local import LocalS3
from tests.support.hooked_store import HookedStore
from tests.support.queues import store_on


@pytest.fixture
def hooked(s3_server: LocalS3, bucket: str) -> HookedStore:
    """A store on this test's bucket whose requests a test can interleave with (or crash)."""
    return HookedStore(store_on(s3_server.connect_kwargs(), bucket))
