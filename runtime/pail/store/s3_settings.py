"""Bucket settings an S3 bucket may carry: lifecycle rules, CORS, EventBridge delivery.

``pail doctor`` compares them with what the ``PailQueue`` construct sets up.
Reading them is optional (a worker role may not be allowed to), so every
answer is a ``BucketSetting`` that says whether the setting was read, is
absent, was denied, or is not implemented by the server; no ``botocore``
error leaves this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class SettingState(StrEnum):
    """What reading one bucket setting found."""

    PRESENT = "present"
    ABSENT = "absent"
    DENIED = "denied"
    UNSUPPORTED = "unsupported"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class BucketSetting:
    """One bucket setting: its state, its value when present, and the server's message."""

    state: SettingState
    value: Mapping[str, Any] | None = None
    message: str = ""


_ABSENT = frozenset(
    {"NoSuchLifecycleConfiguration", "NoSuchCORSConfiguration", "NoSuchConfiguration"}
)
_DENIED = frozenset({"AccessDenied", "403"})
_UNSUPPORTED = frozenset({"NotImplemented", "501", "MethodNotAllowed", "405"})


def _read(call: Callable[[], Mapping[str, Any]]) -> BucketSetting:
    try:
        response = call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        message = f"{code} ({status}): {error.get('Message', '')}".strip()
        if code in _ABSENT:
            return BucketSetting(SettingState.ABSENT, message=message)
        if code in _DENIED or status == 403:
            return BucketSetting(SettingState.DENIED, message=message)
        if code in _UNSUPPORTED or status in (405, 501):
            return BucketSetting(SettingState.UNSUPPORTED, message=message)
        return BucketSetting(SettingState.ERROR, message=message)
    except BotoCoreError as exc:
        return BucketSetting(SettingState.ERROR, message=str(exc))
    body = {k: v for k, v in response.items() if k != "ResponseMetadata"}
    return BucketSetting(SettingState.PRESENT, body)


def read_lifecycle(client: S3Client, bucket: str) -> BucketSetting:
    """The bucket's lifecycle rules (``Rules``)."""
    return _read(lambda: client.get_bucket_lifecycle_configuration(Bucket=bucket))


def read_cors(client: S3Client, bucket: str) -> BucketSetting:
    """The bucket's CORS rules (``CORSRules``)."""
    return _read(lambda: client.get_bucket_cors(Bucket=bucket))


def read_notifications(client: S3Client, bucket: str) -> BucketSetting:
    """The bucket's event notifications (``EventBridgeConfiguration`` when delivery is on)."""
    return _read(lambda: client.get_bucket_notification_configuration(Bucket=bucket))
