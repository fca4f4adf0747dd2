"""Running a handler on claimed jobs: one job (``work_once``) or a loop (``work``).

The loop never dies on one bad job: a handler that raises, returns something
that is not JSON, or outlives ``job_timeout`` fails that attempt with the
error recorded, and the loop goes on. Storage errors on claim back off and
retry. Only a signal to stop ends it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pail.errors import PailError
from pail.message import Message

log = logging.getLogger("pail")

Handler = Callable[[Any], Any]


class HandlerTimeoutError(PailError, TimeoutError):
    """The handler ran longer than ``job_timeout``."""


@dataclass(frozen=True, slots=True)
class Polling:
    """Adaptive idle polling: start at ``floor``, double while the queue stays empty, up to ``ceiling``."""

    floor: float = 0.1
    ceiling: float = 20.0

    def next(self, current: float | None) -> float:
        if current is None:
            return min(self.floor, self.ceiling)
        return min(current * 2, self.ceiling)


def call_handler(handler: Handler, message: Message, job_timeout: float | None) -> Any:
    """Run ``handler(payload)``; with a timeout it runs in a thread that is abandoned on expiry."""
    if job_timeout is None:
        return handler(message.payload)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = handler(message.payload)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"pail-job-{message.id}", daemon=True)
    thread.start()
    thread.join(job_timeout)
    if thread.is_alive():
        raise HandlerTimeoutError(f"handler still running after {job_timeout} s; abandoned")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def run_message(handler: Handler, message: Message, *, job_timeout: float | None = None) -> bool:
    """Run one claimed job to its end. True if it succeeded."""
    try:
        result = call_handler(handler, message, job_timeout)
    except Exception as exc:  # noqa: BLE001 - any handler error fails the attempt, recorded
        log.warning("job %s attempt %d failed: %r", message.id, message.attempt, exc)
        message.fail(exc)
        return False
    except BaseException:
        # KeyboardInterrupt or SystemExit: give the job back before leaving.
        message.release("the worker was interrupted")
        raise
    if message.lease_lost:
        log.warning("job %s finished after its lease was lost; result not recorded", message.id)
        message.fail("lease lost while running")
        return False
    try:
        return message.complete(result)
    except PailError as exc:
        log.warning("job %s: result not recorded: %s", message.id, exc)
        return False
