"""ECS task scale-in protection (``pail.runner.protection``) against a double of the agent's endpoint.

The runner protects its task before the handler starts, renews the
protection while the job runs, drops it when the queue is empty, and never
leaves it on once the job ended, whichever way it ended, or the run did.
Outside ECS nothing is requested. In-process runs use ``MemoryStore``;
the last test runs ``pail work`` as a process against the local S3 server
and stops it with SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pail import JobState, MemoryStore, Pail
from pail.config import ENV_ECS_AGENT_URI, ENV_TASK_PROTECTION
from pail.errors import AccessDeniedError
from pail.local import LocalS3
from pail.runner import run
from pail.runner.protection import TaskProtection, expires_minutes
from tests.support.command import kill_all
from tests.support.ecs_agent import EcsAgentDouble
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def agent() -> Iterator[EcsAgentDouble]:
    with EcsAgentDouble() as running:
        yield running


def protection_of(agent: EcsAgentDouble, **kwargs: Any) -> TaskProtection:
    """A protection as ``from_env`` builds it at a 30 s visibility timeout, its timing shortened."""
    options: dict[str, Any] = {"expires_minutes": expires_minutes(30), "check_every": 10.0}
    return TaskProtection(agent.uri, **{**options, **kwargs})


def queue_with(jobs: int, **kwargs: Any) -> tuple[Pail, list[str]]:
    queue = Pail(MemoryStore("jobs"), **kwargs)
    return queue, [queue.enqueue({"n": n}) for n in range(jobs)]


def run_once(
    queue: Pail, handler: Callable[[Any], Any], protection: TaskProtection, **kw: Any
) -> Any:
    return run(
        queue, handler, once=True, install_signal_handlers=False, protection=protection, **kw
    )


# -- protected while a job runs, whatever way it ends -----------------------------------


def test_given_an_ecs_task_when_a_job_runs_then_it_is_protected_from_the_start_and_released_after(
    agent: EcsAgentDouble,
) -> None:
    queue, (job,) = queue_with(1)
    seen: list[bool] = []

    def handler(payload: Any) -> dict[str, bool]:
        seen.append(agent.protected())
        return {"ok": True}

    summary = run_once(queue, handler, protection_of(agent))

    assert summary.succeeded == 1 and queue.result(job) == {"ok": True}
    assert seen == [True]  # set before the handler started
    assert agent.states() == [True, False] and not agent.protected()
    assert agent.calls[0].minutes == 2


def test_given_a_long_job_when_it_runs_then_the_protection_is_renewed_until_it_ends(
    agent: EcsAgentDouble,
) -> None:
    queue, (job,) = queue_with(1)

    def long_job(payload: Any) -> str:
        wait_until(lambda: len(agent.states()) >= 3, timeout=30, what="two renewals")
        return "done"

    run_once(queue, long_job, protection_of(agent, check_every=0.02, renew_after=0.05))

    states = agent.states()
    assert states[0] and states[1] and states[2] and states[-1] is False
    assert states.count(False) == 1 and not agent.protected()
    assert queue.result(job) == "done"


@pytest.mark.parametrize(
    ("ending", "expected_state"),
    [
        ("raises", JobState.FAILED),
        ("raises SystemExit", JobState.FAILED),
        ("times out", JobState.FAILED),
        ("returns what JSON cannot hold", JobState.FAILED),
    ],
)
def test_given_a_job_that_fails_when_it_ends_then_the_protection_is_dropped(
    agent: EcsAgentDouble, gate: threading.Event, ending: str, expected_state: JobState
) -> None:
    queue, (job,) = queue_with(1, max_retries=0)

    def handler(payload: Any) -> Any:
        assert agent.protected()
        if ending == "raises":
            raise RuntimeError("the export broke")
        if ending == "raises SystemExit":
            raise SystemExit(3)
        if ending == "times out":
            gate.wait(30)
        return {"not json": {1, 2}}

    summary = run_once(queue, handler, protection_of(agent), job_timeout=0.3)

    assert summary.failed == 1 and summary.dead_lettered == 1
    status = queue.status(job)
    assert status is not None and status.state is expected_state
    assert agent.states() == [True, False] and not agent.protected()


def test_given_a_stop_during_a_job_when_the_grace_period_ends_then_it_is_released_and_unprotected(
    agent: EcsAgentDouble, gate: threading.Event
) -> None:
    queue, (job,) = queue_with(1)
    stop = threading.Event()

    def stubborn(payload: Any) -> None:
        stop.set()  # ECS's SIGTERM arrives while the job runs
        gate.wait(30)

    summary = run(
        queue,
        stubborn,
        once=False,
        install_signal_handlers=False,
        grace_period=0.2,
        stop=stop,
        protection=protection_of(agent),
    )

    assert (summary.released, summary.stop_reason) == (1, "stopped")
    status = queue.status(job)
    assert status is not None and status.state is JobState.PENDING
    assert agent.states() == [True, False] and not agent.protected()


def test_given_a_service_when_the_queue_empties_then_the_idle_task_drops_its_protection(
    agent: EcsAgentDouble,
) -> None:
    queue, jobs = queue_with(3)
    stop = threading.Event()

    def stop_once_idle() -> None:
        wait_until(lambda: agent.states() == [True, False], timeout=30, what="the idle release")
        stop.set()

    idle = threading.Thread(target=stop_once_idle, daemon=True)
    idle.start()

    summary = run(
        queue,
        lambda payload: payload["n"],
        once=False,
        install_signal_handlers=False,
        poll_interval=0.05,
        min_poll_interval=0.01,
        stop=stop,
        protection=protection_of(agent),
    )
    idle.join(timeout=30)

    assert summary.succeeded == 3 and [queue.result(j) for j in jobs] == [0, 1, 2]
    # Protected once for the three jobs in a row, dropped once idle, nothing more on stopping.
    assert agent.states() == [True, False] and not agent.protected()


def test_given_a_run_that_fails_on_a_claim_when_it_stops_then_no_protection_is_left_on(
    agent: EcsAgentDouble,
) -> None:
    class RevokedAfterOneListing(MemoryStore):
        lists = 0

        def list(self, prefix: str, **kwargs: Any) -> Any:
            self.lists += 1
            if self.lists > 1:
                raise AccessDeniedError("s3:ListBucket revoked mid-run")
            return super().list(prefix, **kwargs)

    # As the construct's Fargate task runs it: no reclaim pass (its scheduled reaper reclaims).
    queue = Pail(RevokedAfterOneListing("jobs"), shards=1, reclaim=False)
    queue.enqueue({"n": 1})
    protection = protection_of(agent)
    protected_then: list[bool] = []

    def job(payload: Any) -> None:
        protected_then.append(agent.protected())
        queue.store.lists = 10  # type: ignore[attr-defined]

    with pytest.raises(AccessDeniedError):
        run(queue, job, once=True, max_jobs=2, install_signal_handlers=False, protection=protection)

    assert protected_then == [True]
    assert agent.states() == [True, False] and not agent.protected()


# -- outside ECS, and an agent that says no ----------------------------------------------


def test_given_no_agent_uri_when_jobs_run_then_nothing_is_requested(
    agent: EcsAgentDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_ECS_AGENT_URI, raising=False)
    queue, _ = queue_with(2)

    summary = run(queue, lambda payload: None, once=True, max_jobs=2, install_signal_handlers=False)

    assert summary.succeeded == 2 and agent.calls == []
    assert TaskProtection.from_env({}, visibility_timeout=30) is None


def test_given_protection_switched_off_when_in_ecs_then_nothing_is_requested(
    agent: EcsAgentDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ECS_AGENT_URI, agent.uri)
    monkeypatch.setenv(ENV_TASK_PROTECTION, "false")
    queue, _ = queue_with(1)

    run(queue, lambda payload: None, once=True, install_signal_handlers=False)

    assert agent.calls == []
    built = TaskProtection.from_env({ENV_ECS_AGENT_URI: agent.uri}, visibility_timeout=600)
    assert built is not None and built.expires_in_minutes == 30


@pytest.mark.parametrize("refusal", ["access denied", "a task of no service"])
def test_given_an_agent_that_refuses_when_jobs_run_then_they_run_and_it_stops_asking(
    refusal: str, caplog: pytest.LogCaptureFixture
) -> None:
    with EcsAgentDouble(
        authorize=lambda: False, not_in_service=refusal == "a task of no service"
    ) as agent:
        queue, jobs = queue_with(3)
        with caplog.at_level(logging.WARNING, logger="pail.runner"):
            summary = run_once(queue, lambda p: p["n"], protection_of(agent), max_jobs=3)

    assert summary.succeeded == 3 and [queue.result(j) for j in jobs] == [0, 1, 2]
    assert len(agent.calls) == 1 and not agent.protected()
    assert caplog.text.count("scale-in protection is off for this run") == 1


def test_given_an_agent_that_is_down_when_a_job_runs_then_it_runs_unprotected() -> None:
    with EcsAgentDouble() as agent:
        uri = agent.uri
    queue, (job,) = queue_with(1)  # the agent's port is closed now

    summary = run_once(
        queue, lambda payload: "ran", TaskProtection(uri, expires_minutes=2, check_every=10)
    )

    assert summary.succeeded == 1 and queue.result(job) == "ran"


# -- the process: SIGTERM while the task holds a job -------------------------------------


def test_given_pail_work_in_an_ecs_task_when_sigterm_arrives_mid_job_then_it_exits_unprotected(
    s3_server: LocalS3, bucket: str, connect: Callable[..., Pail], tmp_path: Path
) -> None:
    queue = connect()
    started, go = tmp_path / "started", tmp_path / "go"
    job = queue.enqueue({"started": str(started), "go": str(go), "wait": 60})
    env = {
        **os.environ,
        **s3_server.env(),
        "PAIL_BUCKET": bucket,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        ENV_ECS_AGENT_URI: "",
    }
    started_processes: list[subprocess.Popen[str]] = []
    with EcsAgentDouble() as agent:
        env[ENV_ECS_AGENT_URI] = agent.uri
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pail.runner",
                    "work",
                    "--handler",
                    "tests.aws.job_handlers:slow",
                    "--grace-period",
                    "0.5",
                    "--metrics",
                    "none",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            started_processes.append(process)
            wait_until(started.exists, timeout=60, what="the job to start")
            assert agent.protected()
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=60)
        finally:
            kill_all(started_processes)

    assert process.returncode == 0, err[-2000:]
    assert agent.states() == [True, False] and not agent.protected()
    status = queue.status(job)
    assert status is not None and status.state is JobState.PENDING  # released, for another task
