"""Every trigger shape wakes the worker; the keys an event names are claimed first, through the protocol."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from pail import Pail
from pail.aws.lambda_worker import lambda_worker
from pail.aws.triggers import describe_trigger
from tests.support.lambdas import FakeContext, LogCapture

# A job id that was never enqueued (or whose job is long gone).
GHOST_KEY = "queue/01ARZ3NDEKTSV4RRFFQ69G5FAV"


def s3_notification(key: str = GHOST_KEY) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "jobs"}, "object": {"key": key, "size": 42}},
            }
        ]
    }


def eventbridge_object_created(key: str = GHOST_KEY) -> dict[str, Any]:
    return {
        "version": "0",
        "source": "aws.s3",
        "detail-type": "Object Created",
        "detail": {"bucket": {"name": "jobs"}, "object": {"key": key, "size": 42}},
    }


def sqs_wrapped(inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": "m-1", "eventSource": "aws:sqs", "body": json.dumps(inner)},
            {"messageId": "m-2", "eventSource": "aws:sqs", "body": "not json at all"},
        ]
    }


def sns_wrapped(inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "Sns": {"Type": "Notification", "Message": json.dumps(inner)},
            }
        ]
    }


SCHEDULE = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
SELF_HEAL = {"source": "pail.reaper", "detail-type": "pail.self-heal", "reason": "test"}

SHAPES: list[tuple[str, object, str, tuple[str, ...]]] = [
    ("s3 notification", s3_notification(), "s3", (GHOST_KEY,)),
    ("eventbridge object created", eventbridge_object_created(), "eventbridge-s3", (GHOST_KEY,)),
    ("sqs-wrapped s3 notification", sqs_wrapped(s3_notification()), "sqs", (GHOST_KEY,)),
    ("sqs-wrapped eventbridge", sqs_wrapped(eventbridge_object_created()), "sqs", (GHOST_KEY,)),
    ("sns-wrapped s3 notification", sns_wrapped(s3_notification()), "sns", (GHOST_KEY,)),
    ("eventbridge schedule", SCHEDULE, "schedule", ()),
    ("reaper self-heal", SELF_HEAL, "self-heal", ()),
    ("direct invoke {}", {}, "direct", ()),
    ("direct invoke null", None, "direct", ()),
    ("direct invoke with a list", [1, 2], "direct", ()),
    ("an s3 test event", {"Service": "Amazon S3", "Event": "s3:TestEvent"}, "direct", ()),
]


@pytest.mark.parametrize(
    ("event", "kind", "keys"),
    [shape[1:] for shape in SHAPES],
    ids=[shape[0] for shape in SHAPES],
)
def test_given_an_event_shape_when_described_then_its_kind_and_keys_are_found(
    event: object, kind: str, keys: tuple[str, ...]
) -> None:
    trigger = describe_trigger(event)

    assert (trigger.kind, trigger.keys) == (kind, keys)


def test_given_a_url_encoded_key_in_an_s3_notification_when_described_then_it_is_decoded() -> None:
    trigger = describe_trigger(s3_notification("my+queue/queue/01ARZ3NDEKTSV4RRFFQ69G5FAV%3D"))

    assert trigger.keys == ("my queue/queue/01ARZ3NDEKTSV4RRFFQ69G5FAV=",)


def test_given_a_batch_of_records_when_described_then_every_key_is_kept_in_order() -> None:
    records = s3_notification()["Records"]
    event = {
        "Records": [{**records[0], "s3": {"object": {"key": f"queue/{n}"}}} for n in range(1000)]
    }

    trigger = describe_trigger(event)

    assert (trigger.kind, trigger.records) == ("s3", 1000)
    assert trigger.keys == tuple(f"queue/{n}" for n in range(1000))


NAMING: dict[str, Callable[[str], object]] = {
    "s3 notification": s3_notification,
    "eventbridge object created": eventbridge_object_created,
    "sqs-wrapped s3 notification": lambda key: sqs_wrapped(s3_notification(key)),
    "sqs-wrapped eventbridge": lambda key: sqs_wrapped(eventbridge_object_created(key)),
    "sns-wrapped s3 notification": lambda key: sns_wrapped(s3_notification(key)),
}
"""The shapes that name an object, as functions of the key they name."""


@pytest.mark.parametrize(
    ("name", "event", "kind"),
    [shape[:3] for shape in SHAPES],
    ids=[shape[0] for shape in SHAPES],
)
def test_given_any_trigger_when_invoked_then_the_pending_job_is_claimed_through_the_protocol(
    connect: Callable[..., Pail], log_capture: LogCapture, name: str, event: object, kind: str
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 21})
    if name in NAMING:  # an event names the job its enqueue created
        event = NAMING[name](queue.keys.queue(job_id))
    handler = lambda_worker(lambda p: p["n"] * 2, pail=queue, logger=log_capture.logger)

    summary = handler(event, FakeContext())

    assert (summary["processed"], summary["succeeded"], summary["trigger"]) == (1, 1, kind)
    assert queue.result(job_id) == 42
    # SQS: report no failed item, so no notification is redelivered (it only woke the worker).
    assert summary.get("batchItemFailures") == ([] if kind == "sqs" else None)


@pytest.mark.parametrize("name", sorted(NAMING))
def test_given_an_event_naming_a_job_already_gone_when_invoked_then_it_returns_without_listing(
    connect: Callable[..., Pail], log_capture: LogCapture, name: str
) -> None:
    queue = connect()
    waiting = queue.enqueue({"n": 21})  # its own event wakes the worker that runs it
    handler = lambda_worker(lambda p: p["n"] * 2, pail=queue, logger=log_capture.logger)

    summary = handler(NAMING[name](GHOST_KEY), FakeContext())

    assert (summary["processed"], summary["stop_reason"]) == (0, "empty")
    assert queue.result(waiting) is None
