"""The reaper Lambda's self-heal: a job waiting out a retry backoff is not a running worker."""

from __future__ import annotations

from datetime import UTC, datetime

from pail import JobState, MemoryStore, Pail, RetryPolicy
from pail.aws.reaper import ReaperFunction
from tests.support.clocks import ServerClock
from tests.support.lambdas import LogCapture

TIMEOUT = 30.0


class Invocations:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, function_name: str, payload: object) -> None:
        self.calls.append(function_name)


def test_given_a_job_in_backoff_and_jobs_waiting_when_the_reaper_runs_then_it_wakes_a_worker() -> (
    None
):
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(
        MemoryStore("jobs", now=server),
        visibility_timeout=TIMEOUT,
        retry_policy=RetryPolicy.fixed(3600),
    )
    backing_off = queue.enqueue({"n": 1})
    message = queue.claim()
    assert message is not None and message.id == backing_off
    queue.enqueue({"n": 2})  # the notification that should wake a worker for it was lost
    server.advance(60)
    message.fail(RuntimeError("upstream was down"))  # retried in an hour: its lease waits
    invocations = Invocations()
    reaper = ReaperFunction(
        pail=queue,
        logger=LogCapture().logger,
        invoke_worker=invocations,
        worker_function="pail-worker",
        self_heal_after=60,
        clock=lambda: 0.0,
    )

    server.advance(5)  # the decision is 5 s old: a listing cannot tell it from a live lease yet
    young = reaper({}, None)
    server.advance(TIMEOUT)  # nobody renewed it for a whole visibility timeout: nobody runs
    old = reaper({}, None)

    assert young["self_heal"]["invoked"] is False
    assert old["self_heal"]["invoked"] is True
    assert old["depth"]["running"] == 1 and old["depth"]["live_leases"] == 0
    assert invocations.calls == ["pail-worker"]
    status = queue.status(backing_off)
    assert status is not None and status.state is JobState.PENDING  # still waiting its hour
