"""Queues and clients on the test servers: one way to connect, shared by every test folder.

``connect_to`` is what the ``connect`` fixture (``tests/conftest.py``) and the
folders with a server of their own (SeaweedFS in ``tests/e2e``, a proxy in
front of the local server) call: a new ``Pail`` with a client of its own,
its requests counted when a ``RequestCounter`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pail import Pail
from pail.local import ACCESS_KEY, REGION, SECRET_KEY, LoopbackEndpoint
from pail.store.s3 import S3Store
from tests.servers import make_s3_client
from tests.support.counting import RequestCounter

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

Connect = Callable[..., Pail]
"""``connect(**options)``: a new ``Pail`` (``Pail.connect`` options) on the test's bucket."""


def connect_to(
    server_kwargs: Mapping[str, str],
    bucket: str,
    *,
    counter: RequestCounter | None = None,
    **options: Any,
) -> Pail:
    """``Pail.connect`` to ``bucket`` on a server given by its ``connect_kwargs()``.

    The new ``Pail`` has a boto3 client of its own; ``counter`` counts its requests.
    """
    kwargs: dict[str, Any] = {**server_kwargs, **options}
    pail = Pail.connect(bucket, **kwargs)
    if counter is not None:
        counter.attach(_s3(pail).client)
    return pail


def local_kwargs(endpoint_url: str) -> dict[str, str]:
    """``connect_kwargs()`` for the local server's credentials at ``endpoint_url``.

    The local server itself, or a proxy in front of it; for a test's child
    process, which has the URL but not the ``LocalS3``.
    """
    return {
        "endpoint_url": endpoint_url,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "region": REGION,
    }


def store_on(
    server_kwargs: Mapping[str, str], bucket: str, *, counter: RequestCounter | None = None
) -> S3Store:
    """An ``S3Store`` on ``bucket`` with the client ``Pail.connect`` builds (pail's settings)."""
    return _s3(connect_to(server_kwargs, bucket, counter=counter))


def make_client(server: LoopbackEndpoint) -> S3Client:
    """A fresh plain boto3 S3 client for ``server`` (one per thread in concurrency tests)."""
    return make_s3_client(server.connect_kwargs())


def _s3(pail: Pail) -> S3Store:
    store = pail.store
    assert isinstance(store, S3Store)
    return store
