"""A paused queue (``pail pause``) and the AWS entry points: the worker Lambda and the reaper Lambda."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pail import JobState, MemoryStore, Pail
from pail.aws.lambda_worker import lambda_worker
from pail.aws.reaper import ReaperFunction
from tests.support.lambdas import FakeContext, LogCapture


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"doubled": payload["n"] * 2}


def test_given_a_paused_queue_when_the_worker_lambda_is_invoked_then_it_returns_without_claiming(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 1})
    queue.pause("incident 42")
    handler = lambda_worker(double, pail=queue, logger=log_capture.logger)

    paused = handler({}, FakeContext(remaining=900))
    queue.resume()
    resumed = handler({}, FakeContext(remaining=900))

    assert paused["stop_reason"] == "paused" and paused["processed"] == 0
    assert resumed["stop_reason"] == "empty" and resumed["processed"] == 1
    assert queue.result(job_id) == {"doubled": 2}


class Invocations:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, function_name: str, payload: object) -> None:
        self.calls.append(function_name)


def test_given_a_paused_queue_with_old_jobs_when_the_reaper_runs_then_it_wakes_no_worker() -> None:
    now = [datetime(2025, 1, 1, tzinfo=UTC)]
    queue = Pail(MemoryStore("jobs", now=lambda: now[0]), visibility_timeout=30)
    job_id = queue.enqueue({"n": 1})
    queue.pause()
    now[0] += timedelta(seconds=120)  # waited two minutes, and no worker holds a lease
    invocations = Invocations()
    reaper = ReaperFunction(
        pail=queue,
        logger=LogCapture().logger,
        invoke_worker=invocations,
        worker_function="pail-worker",
        self_heal_after=60,
        clock=lambda: 0.0,
    )

    paused = reaper({}, None)
    queue.resume()
    resumed = reaper({}, None)

    assert paused["self_heal"]["invoked"] is False
    assert "the queue is paused" in paused["self_heal"]["reason"]
    assert resumed["self_heal"]["invoked"] is True
    assert invocations.calls == ["pail-worker"]
    status = queue.status(job_id)
    assert status is not None and status.state is JobState.PENDING
