"""Building the boto3 S3 client, and creating a bucket: the only places pail makes a client.

Everything botocore can refuse while a client is built (an unknown profile, a
malformed endpoint or region, a missing region) is translated here into a
``ConfigurationError``, so no caller ever classifies a botocore exception.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pail.config import CLIENT_WORKER_THREADS, WORKER_IN_FLIGHT, validate_endpoint_url
from pail.errors import ConfigurationError, StorageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_EXISTING = frozenset({"BucketAlreadyOwnedByYou", "BucketAlreadyExists"})
POOL_CONNECTIONS = max(32, CLIENT_WORKER_THREADS * WORKER_IN_FLIGHT)
"""botocore's connection pool: every request a worker thread can have in flight (its own, its
overlap pool's, its heartbeat's) for ``CLIENT_WORKER_THREADS`` threads, and never fewer than
``enqueue_many``'s 16 PUTs twice over. Beyond it urllib3 opens and drops extra connections."""


def build_client(
    *,
    endpoint_url: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> S3Client:
    """A boto3 S3 client with pail's retry and timeout settings.

    Credentials and region follow boto3's usual chain unless given. Raises
    ``ConfigurationError`` for anything botocore refuses before a request.
    """
    # botocore's session, not boto3's: the client is the same, and a cold start
    # skips importing boto3 (with s3transfer) and its client-class hooks.
    import botocore.session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    try:
        session = botocore.session.Session(profile=profile)
        session.register_component("data_loader", _s3_loader(session))
        session.get_scoped_config()  # an unknown profile fails here, as boto3's Session does
        region_name = session.get_config_variable("region")
    except ProfileNotFound as exc:
        raise ConfigurationError(f"AWS profile {profile!r} not found: {exc}") from exc
    except BotoCoreError as exc:
        raise ConfigurationError(f"cannot start an AWS session: {exc}") from exc
    if endpoint_url is not None:
        endpoint_url = validate_endpoint_url(endpoint_url)
    config = Config(
        # SigV4 everywhere: S3 refuses SigV2 presigned URLs on buckets made since 2020.
        signature_version="s3v4",
        retries={"mode": "standard", "total_max_attempts": 5},
        connect_timeout=5,
        read_timeout=20,
        max_pool_connections=POOL_CONNECTIONS,
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    try:
        client = session.create_client(
            "s3",
            endpoint_url=endpoint_url,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
            region_name=region or region_name or "us-east-1",
            config=config,
        )
    except (ValueError, BotoCoreError) as exc:
        # botocore refuses a malformed endpoint (AWS_ENDPOINT_URL too) or region
        # with a bare ValueError, others with its own errors: configuration, not a bug.
        raise ConfigurationError(f"cannot build an S3 client: {exc}") from exc
    return cast("S3Client", client)


_LOADERS: dict[tuple[str, ...] | None, Any] = {}
_LOADERS_LOCK = threading.Lock()


def _s3_loader(session: Any) -> Any:
    """A data loader for a session that makes S3 clients only, shared by every session.

    botocore checks a model's service name against every service it ships
    (``list_available_services``: a walk of ~450 folders, twice per client,
    about 20 ms of a cold start). This loader looks for S3's own folder
    instead, and lists the rest only if S3's is missing. The models are
    botocore's, on its usual search path (``AWS_DATA_PATH`` included).

    One loader per search path serves every client the process builds: a
    loader caches the models it has parsed, and S3's (the service model, its
    endpoint rules, the partitions) are half the CPU of building a client
    (117 -> 63 ms each after the first, measured). botocore treats loaded
    models as read-only and already shares them between a session's clients.
    """
    data_path = session.get_config_variable("data_path")
    extra = (
        [str(Path(os.path.expandvars(p)).expanduser()) for p in data_path.split(os.pathsep)]
        if data_path
        else None
    )
    key = tuple(extra) if extra is not None else None
    with _LOADERS_LOCK:
        loader = _LOADERS.get(key)
        if loader is None:
            loader = _LOADERS[key] = _new_s3_loader(extra)
        return loader


def _new_s3_loader(extra: list[str] | None) -> Any:
    from botocore.loaders import Loader

    class S3Loader(Loader):
        def list_available_services(self, type_name: str) -> list[str]:
            for location in self.search_paths:
                folder = Path(location) / "s3"
                if folder.is_dir() and any(
                    self.file_loader.exists(str(version / type_name))
                    for version in folder.iterdir()
                ):
                    return ["s3"]
            return list(super().list_available_services(type_name))

    return S3Loader(extra_search_paths=extra)


def create_bucket(client: S3Client, bucket: str) -> bool:
    """Create ``bucket``; True if this call created it, False if it was there already.

    Raises ``StorageError`` (with the server's reason) if the server refuses.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.create_bucket(Bucket=bucket)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _EXISTING:
            return False
        raise StorageError(f"cannot create bucket {bucket!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot create bucket {bucket!r}: {exc}") from exc
    return True
