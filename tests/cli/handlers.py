"""Job handlers that the CLI tests load by name with ``--handler tests.cli.handlers:...``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"n": payload["n"] * 2}


def explode(payload: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"exploded on {payload}")


def wait_for_file(payload: dict[str, Any]) -> dict[str, Any]:
    """Announce itself on stderr, then wait (at most 30 s) until ``payload["path"]`` exists."""
    print("handler started", file=sys.stderr, flush=True)
    path = Path(payload["path"])
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    return {"waited_for": str(path)}


NOT_CALLABLE = 42
