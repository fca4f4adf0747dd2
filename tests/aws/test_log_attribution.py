"""Log lines carry the job they are about, in a warm Lambda container, even from an abandoned handler.

A job released near the deadline keeps running in its thread (Python cannot
kill a thread). When the container is reused, that thread's late lines must
carry its own ``job_id``, not the id of the job the next invocation runs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from pail import Pail
from pail.aws.lambda_worker import lambda_worker
from tests.support.lambdas import FakeContext, LogCapture
from tests.support.waiting import wait_until

WAIT = 60


def test_given_an_abandoned_handler_when_it_logs_during_the_next_job_then_its_lines_keep_its_job_id(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    first = queue.enqueue({"job": "first"})
    second = queue.enqueue({"job": "second"})
    first_context = FakeContext(remaining=20)
    second_running, first_may_log, first_logged, second_may_end = (
        threading.Event() for _ in range(4)
    )
    logger = log_capture.logger
    calls: Counter[str] = Counter()

    def run(payload: dict[str, Any]) -> dict[str, Any]:
        calls[payload["job"]] += 1
        if payload["job"] == "first" and calls["first"] == 2:
            return {}  # the retry, in the warm container: over at once
        if payload["job"] == "first":
            first_context.advance(16)  # 4 s left: released, and abandoned
            first_may_log.wait(WAIT)
            logger.info("late line from the first job")
            first_logged.set()
            return {}
        logger.info("line from the second job")
        second_running.set()
        second_may_end.wait(WAIT)
        return {}

    handler = lambda_worker(run, pail=queue, safety_margin=10, logger=logger)
    assert handler({}, first_context)["released"] == 1

    warm = threading.Thread(target=handler, args=({}, FakeContext(remaining=900)))
    warm.start()
    try:
        wait_until(second_running.is_set, WAIT)
        first_may_log.set()
        wait_until(first_logged.is_set, WAIT)
    finally:
        first_may_log.set()
        second_may_end.set()
        warm.join(WAIT)

    lines = {r["message"]: r for r in log_capture.records() if "job" in r["message"]}
    assert lines["late line from the first job"].get("job_id") == first
    assert lines["line from the second job"]["job_id"] == second
    assert lines["line from the second job"]["attempt"] == 1
    started = [r for r in log_capture.records() if r["message"] == "job started"]
    assert [(r["job_id"], r["attempt"]) for r in started] == [(first, 1), (first, 2), (second, 1)]
