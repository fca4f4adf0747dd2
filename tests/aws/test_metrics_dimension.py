"""Each queue in a bucket has its own ``queue`` metrics dimension, a queue namespaced ``default`` too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pail import Pail
from pail.aws.lambda_worker import lambda_worker
from pail.aws.reaper import ReaperFunction
from pail.keys import validate_namespace
from pail.metrics_names import DEFAULT_QUEUE_DIMENSION, queue_dimension
from tests.support.lambdas import FakeContext, LogCapture, emf_records


def test_given_the_dimension_of_the_queue_without_namespace_then_no_namespace_can_have_it() -> None:
    with pytest.raises(ValueError, match="invalid queue namespace"):
        validate_namespace(DEFAULT_QUEUE_DIMENSION)
    assert queue_dimension("default") != queue_dimension("")


def test_given_queues_named_default_and_none_in_one_bucket_when_they_publish_then_dimensions_differ(
    connect: Callable[..., Pail],
    log_capture: LogCapture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    published: dict[str, set[Any]] = {}
    for namespace in ("", "default"):
        queue = connect(queue=namespace)
        queue.enqueue({"n": 1})
        worker = lambda_worker(lambda payload: payload, pail=queue, logger=log_capture.logger)
        worker({}, FakeContext())
        ReaperFunction(pail=queue, logger=log_capture.logger)({}, None)
        records = emf_records(capsys.readouterr().out)
        assert len(records) == 2  # the worker's and the reaper's
        published[namespace] = {record["queue"] for record in records}

    assert published == {"": {"_default"}, "default": {"default"}}
