"""The serverless entry points' test doubles: a Lambda context whose clock the test moves,
a Powertools logger the test can read, and the EMF records out of captured stdout."""

from __future__ import annotations

import io
import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

_services = itertools.count()


class FakeContext:
    """A Lambda context: remaining time runs down in real time, and ``advance`` spends more of it.

    ``advance`` lets a handler "take" seconds of the invocation without the test
    waiting for them, so time-driven behaviour is exact. With ``real_time=False``
    only ``advance`` spends time: what a test reads at a handler's start is then
    exactly what the worker judged just before it, however busy the machine.

    >>> context = FakeContext(remaining=5.0, real_time=False)
    >>> context.advance(1.25)
    >>> context.get_remaining_time_in_millis()
    3750
    """

    function_name = "pail-worker"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:pail-worker"
    log_group_name = "/aws/lambda/pail-worker"
    log_stream_name = "2025/01/01/[$LATEST]abcdef"

    def __init__(self, remaining: float = 900.0, *, real_time: bool = True) -> None:
        self._clock: Callable[[], float] = time.monotonic if real_time else lambda: 0.0
        self._deadline = self._clock() + remaining
        self._lock = threading.Lock()
        self.aws_request_id = f"request-{next(_services)}"

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._deadline -= seconds

    def get_remaining_time_in_millis(self) -> int:
        with self._lock:
            return max(0, int((self._deadline - self._clock()) * 1000))


class LogCapture:
    """A Powertools ``Logger`` of its own (a fresh service name) writing JSON lines to memory."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.logger = Logger(service=f"pail-test-{next(_services)}", stream=self.stream)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line]


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
