"""Fixtures for the serverless entry points: a Lambda context whose clock the test moves,
a Powertools logger the test can read, EMF records out of captured stdout, and queues on the
real local S3 server."""

from __future__ import annotations

import io
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from pail import Pail
from pail.config import ALL_ENV_VARS
from pail.local import LocalS3
from tests.conftest import make_client

_services = itertools.count()


class FakeContext:
    """A Lambda context: remaining time runs down in real time, and ``advance`` spends more of it.

    ``advance`` lets a handler "take" seconds of the invocation without the test
    waiting for them, so time-driven behaviour is exact.
    """

    function_name = "pail-worker"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:pail-worker"
    log_group_name = "/aws/lambda/pail-worker"
    log_stream_name = "2025/01/01/[$LATEST]abcdef"

    def __init__(self, remaining: float = 900.0) -> None:
        self._deadline = time.monotonic() + remaining
        self._lock = threading.Lock()
        self.aws_request_id = f"request-{next(_services)}"

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._deadline -= seconds

    def get_remaining_time_in_millis(self) -> int:
        with self._lock:
            return max(0, int((self._deadline - time.monotonic()) * 1000))


class LogCapture:
    """A Powertools ``Logger`` of its own (a fresh service name) writing JSON lines to memory."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.logger = Logger(service=f"pail-test-{next(_services)}", stream=self.stream)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line]


class RequestCounter:
    """Counts the HTTP requests a boto3 client sends (retries included), by S3 operation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_operation: Counter[str] = Counter()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-send.s3", self._sent)
        return client

    def _sent(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self.by_operation[event_name.rsplit(".", 1)[-1]] += 1

    def total(self) -> int:
        with self._lock:
            return sum(self.by_operation.values())


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting"
        time.sleep(0.01)


def emf_records(text: str) -> list[dict[str, Any]]:
    """The EMF records (JSON objects with an ``_aws`` key) among captured stdout lines."""
    records = []
    for line in text.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            records.append(json.loads(line))
    return records


def metric_values(records: list[dict[str, Any]], name: str) -> list[float]:
    """Every value of metric ``name`` across ``records`` (EMF puts a list or a number)."""
    values: list[float] = []
    for record in records:
        value = record.get(name)
        if isinstance(value, list):
            values.extend(value)
        elif value is not None:
            values.append(value)
    return values


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No PAIL_* or POWERTOOLS_* setting leaks in from the machine running the tests."""
    for name in (*ALL_ENV_VARS, "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def connect(s3_server: LocalS3, bucket: str) -> Callable[..., Pail]:
    """A new ``Pail`` on this test's bucket, with its own client."""

    def _connect(**options: Any) -> Pail:
        return Pail.connect(bucket, client=make_client(s3_server), **options)

    return _connect


@pytest.fixture
def log_capture() -> LogCapture:
    return LogCapture()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event a handler can block on; set at teardown so no abandoned handler thread lingers."""
    event = threading.Event()
    yield event
    event.set()
