"""Waiting on a condition with a bounded timeout: never a bare sleep standing in for synchronisation."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_FIRST, POLL_MOST = 0.01, 0.1
"""The first pause between two looks at the condition, and the longest (it grows by half each time)."""


def wait_until(condition: Callable[[], bool], timeout: float = 60.0, *, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test (AssertionError) after ``timeout`` seconds.

    The timeout bounds a failing test on a loaded machine; a passing one waits only as long
    as its condition takes.
    """
    deadline = time.monotonic() + timeout
    pause = POLL_FIRST
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MOST)
