"""Fixtures for the serverless entry points: a clean environment, a Powertools logger the test
can read, and a gate for handlers to block on. The test doubles (a Lambda context, EMF records)
are in ``tests/support/lambdas.py``; queues on the local server come from ``tests/conftest.py``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from pail.config import ALL_ENV_VARS
from tests.support.lambdas import LogCapture


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No PAIL_* or POWERTOOLS_* setting leaks in from the machine running the tests."""
    for name in (*ALL_ENV_VARS, "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def log_capture() -> LogCapture:
    return LogCapture()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event a handler can block on; set at teardown so no abandoned handler thread lingers."""
    event = threading.Event()
    yield event
    event.set()
