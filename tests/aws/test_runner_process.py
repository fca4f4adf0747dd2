"""The Fargate runner as a real subprocess (``python -m pail.runner``) against the local S3 server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from tests.support.command import kill_all
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60


@pytest.fixture
def runner_env(s3_server: LocalS3, bucket: str) -> dict[str, str]:
    """The environment a task definition gives the runner: the bucket, credentials, endpoint."""
    return {
        **os.environ,
        **s3_server.env(),
        "PAIL_BUCKET": bucket,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def spawn(runner_env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``python -m pail.runner ARGS``; anything still running at teardown is killed."""
    started: list[subprocess.Popen[str]] = []

    def _spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "pail.runner", *args],
            cwd=ROOT,
            env=env or runner_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield _spawn
    kill_all(started)


def finish(process: subprocess.Popen[str]) -> tuple[int, dict[str, Any] | None, str]:
    """Wait for the runner; return its exit code, its JSON summary line and its stderr."""
    out, err = process.communicate(timeout=TIMEOUT)
    lines = out.strip().splitlines()
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    return process.returncode, summary, err


def test_given_an_empty_queue_when_work_once_runs_then_it_exits_zero_or_the_chosen_code(
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    code, summary, _ = finish(spawn("work-once", "--handler", "tests.aws.job_handlers:double"))
    assert code == 0
    assert summary is not None and (summary["processed"], summary["stop_reason"]) == (0, "empty")

    strict = spawn(
        "work-once", "--handler", "tests.aws.job_handlers:double", "--empty-exit-code", "3"
    )
    assert finish(strict)[0] == 3


def test_given_two_pending_jobs_when_work_once_runs_then_it_processes_one_and_exits_zero(
    spawn: Callable[..., subprocess.Popen[str]], connect: Callable[..., Pail]
) -> None:
    queue = connect()
    ids = [queue.enqueue({"n": n}) for n in (1, 2)]

    code, summary, _ = finish(spawn("work-once", "--handler", "tests.aws.job_handlers:double"))

    assert code == 0
    assert summary is not None
    assert (summary["processed"], summary["succeeded"], summary["stop_reason"]) == (
        1,
        1,
        "max_jobs",
    )
    finished = {n: queue.result(job_id) for n, job_id in zip((1, 2), ids, strict=True)}
    ((n, result),) = [(n, r) for n, r in finished.items() if r is not None]
    assert result == {"doubled": 2 * n}
    assert queue.stats().pending == 1


@pytest.mark.parametrize(
    ("args", "env_change", "message"),
    [
        (("--handler", "no_such_jobs_module:run"), {}, "no module named 'no_such_jobs_module'"),
        (
            ("--handler", "tests.aws.job_handlers:double"),
            {"PAIL_BUCKET": "no-such-bucket-here"},
            "does not exist",
        ),
        ((), {}, "no handler"),
    ],
    ids=["unknown handler module", "missing bucket", "no handler at all"],
)
def test_given_a_configuration_error_when_work_once_runs_then_it_exits_two_with_a_clear_message(
    spawn: Callable[..., subprocess.Popen[str]],
    runner_env: dict[str, str],
    args: tuple[str, ...],
    env_change: dict[str, str],
    message: str,
) -> None:
    code, summary, err = finish(spawn("work-once", *args, env={**runner_env, **env_change}))

    assert code == 2
    assert summary is None
    assert message in err


def slow_job(queue: Pail, tmp_path: Path) -> tuple[str, Path, Path]:
    started, go = tmp_path / "started", tmp_path / "go"
    job_id = queue.enqueue({"started": str(started), "go": str(go), "wait": TIMEOUT})
    return job_id, started, go


def test_given_sigterm_during_a_job_that_outlives_the_grace_period_then_it_is_released_not_lost(
    spawn: Callable[..., subprocess.Popen[str]], connect: Callable[..., Pail], tmp_path: Path
) -> None:
    queue = connect()
    job_id, started, _ = slow_job(queue, tmp_path)
    process = spawn(
        "work-once", "--handler", "tests.aws.job_handlers:slow", "--grace-period", "0.5"
    )
    wait_until(started.exists)

    process.send_signal(signal.SIGTERM)
    code, summary, err = finish(process)

    assert code == 0
    assert summary is not None
    assert (summary["processed"], summary["released"], summary["stop_reason"]) == (1, 1, "signal")
    assert "SIGTERM received" in err
    status = queue.status(job_id)
    assert status is not None
    assert (status.state, status.attempts) == (JobState.PENDING, 1)
    assert status.error is not None and status.error.type == "LeaseReleased"
    assert "SIGTERM" in status.error.message
    # Not lost: another worker claims it at once and completes it.
    assert connect().work_once(lambda payload: {"finished": "elsewhere"})
    assert queue.result(job_id) == {"finished": "elsewhere"}


def test_given_sigterm_during_a_job_that_ends_within_the_grace_period_then_it_completes(
    spawn: Callable[..., subprocess.Popen[str]], connect: Callable[..., Pail], tmp_path: Path
) -> None:
    queue = connect()
    job_id, started, go = slow_job(queue, tmp_path)
    queue.enqueue({"n": 1})  # must stay pending: no claim after SIGTERM
    process = spawn(
        "work-once",
        "--handler",
        "tests.aws.job_handlers:slow",
        "--max-jobs",
        "5",
        "--grace-period",
        "30",
    )
    wait_until(started.exists)

    process.send_signal(signal.SIGTERM)
    go.write_text("go")
    code, summary, _ = finish(process)

    assert code == 0
    assert summary is not None
    assert (summary["processed"], summary["succeeded"], summary["stop_reason"]) == (
        1,
        1,
        "signal",
    )
    assert queue.result(job_id) == {"finished": True}
    assert queue.stats().pending == 1


def test_given_the_service_when_jobs_arrive_and_then_sigterm_then_it_serves_them_and_exits_zero(
    spawn: Callable[..., subprocess.Popen[str]], connect: Callable[..., Pail]
) -> None:
    queue = connect()
    process = spawn("work", "--handler", "tests.aws.job_handlers:double", "--poll-interval", "0.2")
    ids = [queue.enqueue({"n": n}) for n in (3, 4)]
    wait_until(lambda: all(queue.result(job_id) is not None for job_id in ids))

    process.send_signal(signal.SIGTERM)
    code, summary, _ = finish(process)

    assert code == 0
    assert summary is not None
    assert (summary["processed"], summary["stop_reason"]) == (2, "signal")
    assert [queue.result(job_id) for job_id in ids] == [{"doubled": 6}, {"doubled": 8}]
