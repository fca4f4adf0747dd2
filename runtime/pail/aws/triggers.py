"""What woke the worker Lambda, and the object keys its event names.

Every trigger is accepted: an S3 ObjectCreated notification on ``queue/``
(direct, through EventBridge, or wrapped in SQS or SNS), an EventBridge
schedule, the reaper's self-heal invocation, or a direct invoke with any
payload. The keys an event names are candidates, never the job itself: the
worker claims them through the protocol first (``pail.aws.named``), so a
thousand notifications for one job still run it once, and a notification
that was dropped, repeated or late changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

S3 = "s3"
EVENTBRIDGE_S3 = "eventbridge-s3"
SQS = "sqs"
SNS = "sns"
SCHEDULE = "schedule"
SELF_HEAL = "self-heal"
DIRECT = "direct"

SELF_HEAL_SOURCE = "pail.reaper"
"""The ``source`` of the event the reaper sends when it invokes a worker (self-heal)."""

LOGGED_KEYS = 10
"""How many of an event's keys the worker's log line shows."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """The kind of event, and every object key it named, in order."""

    kind: str
    keys: tuple[str, ...] = ()
    records: int = 0


def describe_trigger(event: object) -> Trigger:
    """Classify a Lambda event. Never raises: anything unrecognised is a direct invoke.

    >>> describe_trigger({"source": "aws.events", "detail-type": "Scheduled Event"}).kind
    'schedule'
    >>> describe_trigger({}).kind, describe_trigger(None).kind
    ('direct', 'direct')
    """
    if not isinstance(event, dict):
        return Trigger(DIRECT)
    records = event.get("Records")
    if isinstance(records, list) and records:
        return _from_records(records)
    source, detail_type = event.get("source"), event.get("detail-type")
    if source == "aws.s3":
        return Trigger(EVENTBRIDGE_S3, _eventbridge_keys(event), 1)
    if source == SELF_HEAL_SOURCE:
        return Trigger(SELF_HEAL)
    if detail_type == "Scheduled Event":
        return Trigger(SCHEDULE)
    return Trigger(DIRECT)


def _from_records(records: list[Any]) -> Trigger:
    first = records[0] if isinstance(records[0], dict) else {}
    source = first.get("eventSource") or first.get("EventSource")
    kind = {"aws:s3": S3, "aws:sqs": SQS, "aws:sns": SNS}.get(str(source), DIRECT)
    keys: list[str] = []
    for record in records:
        keys.extend(_record_keys(record))
    return Trigger(kind, tuple(keys), len(records))


def _record_keys(record: object) -> list[str]:
    if not isinstance(record, dict):
        return []
    s3 = record.get("s3")
    if isinstance(s3, dict):
        key = s3.get("object", {}).get("key") if isinstance(s3.get("object"), dict) else None
        return [unquote_plus(key)] if isinstance(key, str) else []
    # SQS carries the notification in `body`, SNS in `Sns.Message`; either may
    # itself be an S3 event, an EventBridge event or an SNS envelope.
    sns = record.get("Sns")
    text = sns.get("Message") if isinstance(sns, dict) else record.get("body")
    inner = _json(text)
    if isinstance(inner, dict):
        if isinstance(inner.get("Records"), list):
            return [key for item in inner["Records"] for key in _record_keys(item)]
        if inner.get("source") == "aws.s3":
            return list(_eventbridge_keys(inner))
        if inner.get("Type") == "Notification":
            return _record_keys({"Sns": inner})
    return []


def _eventbridge_keys(event: dict[str, Any]) -> tuple[str, ...]:
    detail = event.get("detail")
    obj = detail.get("object") if isinstance(detail, dict) else None
    key = obj.get("key") if isinstance(obj, dict) else None
    return (key,) if isinstance(key, str) else ()


def _json(text: object) -> object:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
