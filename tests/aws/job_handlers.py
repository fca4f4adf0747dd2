"""Job handlers the runner tests name with ``--handler`` in a real subprocess."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"doubled": payload["n"] * 2}


def slow(payload: dict[str, Any]) -> dict[str, Any]:
    """Mark that the job started, then wait for the test's go-ahead file (up to ``wait`` s)."""
    Path(payload["started"]).write_text("started")
    go = Path(payload["go"])
    deadline = time.monotonic() + payload.get("wait", 60)
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never gave the go-ahead")
        time.sleep(0.01)  # the job's own "work": waiting for an outside event
    return {"finished": True}


def two_arguments(payload: dict[str, Any], extra: Any) -> None:
    """Not a valid job handler: it needs two arguments."""
