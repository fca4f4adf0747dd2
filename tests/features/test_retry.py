"""Retry backoff: a failed job waits ``RetryPolicy.delay`` before the reaper requeues it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pail import ConfigurationError, Ending, JobState, MemoryStore, Pail, RetryPolicy
from tests.support.clocks import ServerClock
from tests.support.counting import RequestCounter


def _failing(payload: object) -> object:
    raise ValueError("upstream is down")


def test_given_backoff_when_an_attempt_fails_then_the_job_waits_and_the_reaper_requeues_it() -> (
    None
):
    server = ServerClock()
    pail = Pail(
        MemoryStore("jobs", now=server),
        visibility_timeout=10,
        retry_policy=RetryPolicy.exponential(60, max_delay=600),
    )
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None

    assert message.fail(ValueError("upstream is down")) is Ending.REQUEUED

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert status.error is not None and status.error.type == "ValueError"
    assert pail.claim() is None  # waiting: not claimable
    server.advance(30)  # expired as a lease (10 s), not yet as a backoff (60 s)
    report = pail.reap()
    assert (report.backing_off, report.requeued) == (1, 0)
    assert pail.claim() is None
    server.advance(32)
    assert pail.reap().requeued_ids == [job_id]
    retry = pail.claim()
    assert retry is not None and retry.attempt == 2
    retry.complete("ok")
    assert pail.result(job_id) == "ok"


def test_given_backoff_when_retries_run_out_then_the_last_failure_dead_letters_at_once() -> None:
    pail = Pail(
        MemoryStore("jobs", now=ServerClock()),
        max_retries=0,
        retry_policy=RetryPolicy.fixed(60),
    )
    job_id = pail.enqueue({"n": 1})

    assert pail.work_once(_failing) is True

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.FAILED


def test_given_no_policy_when_an_attempt_fails_then_it_is_pending_at_once(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1})

    pail.work_once(_failing)

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert pail.claim() is not None  # the default keeps the original's behaviour


def test_given_backoff_on_the_real_server_when_reaping_then_the_retry_runs_once_due(
    connect: Callable[..., Pail], counter: RequestCounter
) -> None:
    pail = connect(visibility_timeout=1.0, retry_policy=RetryPolicy.fixed(1.0))
    job_id = pail.enqueue({"n": 1})
    pail.work_once(_failing)
    attempts: list[int] = []

    def succeed(payload: object) -> str:
        attempts.append(1)
        return "ok"

    tick = threading.Event()
    for _ in range(100):  # up to 10 s of server time; a retry is due after about 2
        pail.reap()
        if pail.work_once(succeed):
            break
        tick.wait(0.1)

    assert attempts == [1]
    assert pail.result(job_id) == "ok"
    status = pail.status(job_id)
    assert status is not None and status.attempts == 2


@pytest.mark.parametrize(
    "build",
    [
        lambda: RetryPolicy(base=-1),
        lambda: RetryPolicy(base=1, factor=0.5),
        lambda: RetryPolicy(base=1, jitter=2),
    ],
)
def test_given_bad_policy_when_built_then_configuration_error(
    build: Callable[[], RetryPolicy],
) -> None:
    with pytest.raises(ConfigurationError):
        build()


def test_given_jitter_when_computing_delays_then_within_bounds_and_the_same_for_everyone() -> None:
    policy = RetryPolicy.exponential(10, jitter=0.5)

    delays = [policy.delay(2, f"job-{n}") for n in range(50)]

    assert all(10 <= d <= 20 for d in delays)
    assert len(set(delays)) > 40  # spread
    assert policy.delay(2, "job-1") == policy.delay(2, "job-1")  # owner and reaper agree
