"""Job handlers that the CLI tests load by name with ``--handler tests.cli.handlers:...``."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from pail import current_job


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"n": payload["n"] * 2}


async def async_whoami(payload: dict[str, Any]) -> dict[str, Any]:
    """A coroutine handler that reports the job ``pail.current_job()`` says it runs."""
    await asyncio.sleep(0)
    job = current_job()
    assert job is not None, "current_job() is None inside a handler"
    return {"n": payload["n"], "job": job.message.id, "attempt": job.message.attempt}


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
