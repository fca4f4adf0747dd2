"""Job handlers that more than one test folder runs, by import or by name (``--handler tests.support.handlers:...``)."""

from __future__ import annotations

import asyncio
from typing import Any

from pail import current_job


async def whoami(payload: dict[str, Any]) -> dict[str, Any]:
    """A coroutine handler: it awaits, then reports the job ``pail.current_job()`` says it runs.

    Its result proves both that the entry point awaited it and that the job context was set.
    """
    await asyncio.sleep(0)
    job = current_job()
    assert job is not None, "current_job() is None inside a handler"
    return {"n": payload["n"], "job": job.message.id, "attempt": job.message.attempt}
