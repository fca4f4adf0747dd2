"""The S3 ``Store``: boto3 underneath, pail errors on top.

Every ``botocore`` error is translated here and nowhere else; nothing above
this module sees a ``ClientError``.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
)

from pail.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    ConditionFailedError,
    ConfigurationError,
    ConflictError,
    CredentialsNotFoundError,
    ObjectTooLargeError,
    StorageError,
)
from pail.store.base import ListPage, ObjectInfo, PrefixPage, StoredObject, WriteResult

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_ACCESS_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "403",
    }
)
_MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_CONFLICT_RETRIES = 5


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_DIRECTORY_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}--[a-z0-9-]+--x-s3$")


def is_directory_bucket(bucket: str) -> bool:
    """S3 Express One Zone directory buckets end in ``--x-s3``.

    >>> is_directory_bucket("jobs--use1-az4--x-s3"), is_directory_bucket("jobs")
    (True, False)
    """
    return bucket.endswith("--x-s3")


class Mode(StrEnum):
    """Standard (general purpose bucket) or express (S3 Express One Zone directory bucket)."""

    STANDARD = "standard"
    EXPRESS = "express"

    @classmethod
    def for_bucket(cls, bucket: str) -> Mode:
        """Express for names ending in ``--x-s3``, as S3 names directory buckets.

        >>> Mode.for_bucket("jobs"), Mode.for_bucket("jobs--use1-az4--x-s3")
        (<Mode.STANDARD: 'standard'>, <Mode.EXPRESS: 'express'>)
        """
        return cls.EXPRESS if is_directory_bucket(bucket) else cls.STANDARD


def validate_bucket_name(bucket: str) -> str:
    """Return ``bucket`` if S3 would accept it as a bucket name, else raise ``ConfigurationError``.

    >>> validate_bucket_name("jobs")
    'jobs'
    """
    if not isinstance(bucket, str) or not (
        _DIRECTORY_BUCKET.match(bucket) or (_BUCKET.match(bucket) and ".." not in bucket)
    ):
        raise ConfigurationError(
            f"invalid bucket name {bucket!r}: S3 bucket names are 3-63 characters of a-z, 0-9, "
            "'.' and '-', starting and ending with a letter or digit"
        )
    return bucket


def store_for(bucket: str, client: object) -> S3Store:
    """The store of ``Pail(bucket, client)`` (pailq 0.1.1's constructor): ``client`` is a boto3 S3 client.

    The bucket name is checked here, and so is the client, so that a wrong
    argument fails at construction with a clear error, not at the first request.

    >>> store_for("jobs", object())
    Traceback (most recent call last):
    ...
    pail.errors.ConfigurationError: Pail(bucket, client): client must be a boto3 S3 client (boto3.client("s3")), got object
    """
    validate_bucket_name(bucket)
    meta = getattr(client, "meta", None)
    if not callable(getattr(client, "put_object", None)) or meta is None:
        raise ConfigurationError(
            'Pail(bucket, client): client must be a boto3 S3 client (boto3.client("s3")), '
            f"got {type(client).__name__}"
        )
    s3_client: S3Client = client  # type: ignore[assignment]  # checked above, as far as duck typing goes
    return S3Store(s3_client, bucket)


def _server_time(response: Mapping[str, Any]) -> datetime:
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    date = headers.get("date")
    if date:
        return parsedate_to_datetime(date).astimezone(UTC)
    # Every S3 response carries Date; this fallback only serves odd proxies.
    return datetime.now(UTC)


def _retry_attempts(response: Mapping[str, Any]) -> int:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class S3Store:
    """A ``Store`` over one S3 (or S3-compatible) bucket.

    Build it with ``Pail.connect`` rather than directly; it takes an existing
    boto3 client so that tests and users can inject their own.
    """

    def __init__(self, client: S3Client, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        self._endpoint = client.meta.endpoint_url

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def client(self) -> S3Client:
        return self._client

    @property
    def ordered_listing(self) -> bool:
        return not is_directory_bucket(self._bucket)

    @contextmanager
    def _translated(self, key: str | None = None) -> Iterator[None]:
        where = f"bucket {self._bucket!r} at {self._endpoint}"
        try:
            yield
        except ClientError as exc:
            code, status = _code(exc), _status(exc)
            message = exc.response.get("Error", {}).get("Message", "") or code
            if code == "NoSuchBucket":
                raise BucketNotFoundError(f"{where}: the bucket does not exist") from exc
            if code in _ACCESS_CODES or status == 403:
                raise AccessDeniedError(f"{where}: access denied ({code}: {message})") from exc
            if code == "InvalidBucketName":
                raise ConfigurationError(f"{where}: invalid bucket name") from exc
            target = f" key {key!r}" if key else ""
            raise StorageError(f"{where}{target}: {code} ({status}): {message}") from exc
        except NoCredentialsError as exc:
            raise CredentialsNotFoundError(where) from exc
        except ParamValidationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from exc
        except EndpointConnectionError as exc:
            raise StorageError(f"{where}: cannot reach the endpoint: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"{where}: {exc}") from exc

    def get(self, key: str) -> StoredObject | None:
        return self._get(key, None)

    def get_bounded(self, key: str, max_bytes: int) -> StoredObject | None:
        """``get``, but the body of an object over ``max_bytes`` is not read (``BoundedGetter``)."""
        return self._get(key, max_bytes)

    def _get(self, key: str, max_bytes: int | None) -> StoredObject | None:
        with self._translated(key):
            try:
                response = self._client.get_object(Bucket=self._bucket, Key=key)
            except ClientError as exc:
                if _code(exc) in _MISSING_KEY_CODES:
                    return None
                raise
            size = response.get("ContentLength", 0)
            if max_bytes is not None and size > max_bytes:
                # The headers say enough: drop the connection rather than read the body.
                response["Body"].close()
                raise ObjectTooLargeError(
                    key,
                    size=size,
                    etag=response["ETag"],
                    last_modified=response["LastModified"],
                    limit=max_bytes,
                )
            body = response["Body"].read()
            return StoredObject(
                key=key,
                body=body,
                etag=response["ETag"],
                last_modified=response["LastModified"],
                metadata=dict(response.get("Metadata", {})),
            )

    def head(self, key: str) -> ObjectInfo | None:
        with self._translated(key):
            try:
                response = self._client.head_object(Bucket=self._bucket, Key=key)
            except ClientError as exc:
                if _code(exc) in _MISSING_KEY_CODES or _status(exc) == 404:
                    return None
                raise
            return ObjectInfo(
                key=key,
                etag=response["ETag"],
                last_modified=response["LastModified"],
                size=response["ContentLength"],
                metadata=dict(response.get("Metadata", {})),
            )

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> WriteResult:
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": key,
            "Body": body,
            "ContentType": content_type,
        }
        if metadata:
            params["Metadata"] = dict(metadata)
        if if_none_match:
            params["IfNoneMatch"] = "*"
        if if_match is not None:
            params["IfMatch"] = if_match
        conditional = if_none_match or if_match is not None
        with self._translated(key):
            response = self._with_conflict_retries(
                key, conditional, lambda: self._client.put_object(**params)
            )
            return WriteResult(
                etag=response["ETag"],
                server_time=_server_time(response),
                retried=_retry_attempts(response) > 0,
            )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if if_match is not None:
            params["IfMatch"] = if_match
        with self._translated(key):
            self._with_conflict_retries(
                key, if_match is not None, lambda: self._client.delete_object(**params)
            )

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        params: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if continuation:
            params["ContinuationToken"] = continuation
        elif start_after:
            params["StartAfter"] = start_after
        with self._translated():
            response = self._client.list_objects_v2(**params)
        items = tuple(
            ObjectInfo(
                key=item["Key"],
                etag=item["ETag"],
                last_modified=item["LastModified"],
                size=item["Size"],
            )
            for item in response.get("Contents", [])
        )
        token = response.get("NextContinuationToken") if response.get("IsTruncated") else None
        return ListPage(items, token, _server_time(response))

    def list_prefixes(
        self,
        prefix: str,
        *,
        delimiter: str = "/",
        max_keys: int = 1000,
        continuation: str | None = None,
    ) -> PrefixPage:
        params: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": prefix,
            "Delimiter": delimiter,
            "MaxKeys": max_keys,
        }
        if continuation:
            params["ContinuationToken"] = continuation
        with self._translated():
            response = self._client.list_objects_v2(**params)
        keys = tuple(
            ObjectInfo(
                key=item["Key"],
                etag=item["ETag"],
                last_modified=item["LastModified"],
                size=item["Size"],
            )
            for item in response.get("Contents", [])
        )
        prefixes = tuple(
            str(entry["Prefix"])
            for entry in response.get("CommonPrefixes", [])
            if "Prefix" in entry
        )
        token = response.get("NextContinuationToken") if response.get("IsTruncated") else None
        return PrefixPage(prefixes, keys, token, _server_time(response))

    def presign_get(self, key: str, expires_in: int) -> str:
        with self._translated(key):
            return self._client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self._bucket, "Key": key},
                ExpiresIn=expires_in,
            )

    def _with_conflict_retries(self, key: str, conditional: bool, call: Any) -> Mapping[str, Any]:
        """Run ``call``, retrying 409 ConditionalRequestConflict, translating 412/404.

        A 409 means S3 did not apply the write because another conditional
        write on the key was in flight, so retrying it is always safe.
        """
        # A try of an earlier round may have been applied before its 409 (botocore
        # resent it after a lost response): every later answer is then "retried".
        resent = False
        for attempt in range(_CONFLICT_RETRIES):
            try:
                response: Mapping[str, Any] = call()
                if resent and _retry_attempts(response) == 0:
                    metadata = {**response.get("ResponseMetadata", {}), "RetryAttempts": 1}
                    response = {**response, "ResponseMetadata": metadata}
                return response
            except ClientError as exc:
                code, status = _code(exc), _status(exc)
                if code == "ConditionalRequestConflict" or status == 409:
                    resent = resent or _retry_attempts(exc.response) > 0
                    time.sleep(random.uniform(0, 0.05 * 2**attempt))
                    continue
                if code == "NoSuchBucket":
                    raise  # a 404 too, but no failed condition: _translated names the bucket
                # botocore retries lost responses and 5xx by itself; a failed
                # condition on a retry may be against the first try's own write.
                retried = resent or _retry_attempts(exc.response) > 0
                if conditional and (code == "PreconditionFailed" or status == 412):
                    raise ConditionFailedError(key, retried=retried) from exc
                if conditional and (code in _MISSING_KEY_CODES or status == 404):
                    raise ConditionFailedError(key, missing=True, retried=retried) from exc
                raise
        raise ConflictError(f"{key!r}: 409 ConditionalRequestConflict {_CONFLICT_RETRIES} times")
