"""Waiting on a condition with a bounded timeout: never a bare sleep standing in for synchronisation."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, *, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test (AssertionError) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)
