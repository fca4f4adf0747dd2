"""SIGTERM on ``pail work-once`` and ``pail work`` at every step of a job's life, as real processes.

A scripted proxy in front of the local S3 server holds one request (the
claim's listing, each step of the claim, each step of the completion or of a
release) while the test signals the process, then lets it through. Whatever
the step, the process exits 0, nothing is left running, and the job is done,
or pending with no attempt spent if its handler never started, or pending
with its released attempt counted if it did.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pail import JobState, Pail
from pail.keys import RUN
from pail.local import LocalS3
from tests.support.command import kill_all, pail_script, process_env, start
from tests.support.scripted_proxy import Action, Request, Script, ScriptedProxy
from tests.support.waiting import wait_until

TIMEOUT = 60


def hold(method: str, prefix: str) -> Script:
    """Hold every ``method`` request on ``prefix`` until the proxy is released."""

    def script(request: Request) -> Action:
        return Action.HOLD if request.is_(method, prefix) else Action.FORWARD

    return script


def signal_delivered(pid: int, signum: int) -> bool:
    """True once no thread of ``pid`` has ``signum`` pending: the process has taken it.

    Python runs its handler at the main thread's next bytecode, before the
    held response is acted on; so releasing after this is never too early.
    """
    bit = 1 << (signum - 1)
    files = [Path(f"/proc/{pid}/status"), *Path(f"/proc/{pid}/task").glob("*/status")]
    for status in files:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(":")
            if name in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & bit:
                return False
    return True


@pytest.fixture
def spawn(
    s3_server: LocalS3, bucket: str, proxy: ScriptedProxy
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def _spawn(command: str, *args: str) -> subprocess.Popen[str]:
        argv = [pail_script(), command, bucket, "--endpoint-url", proxy.endpoint_url, *args]
        process = start(argv, process_env(s3_server.env()))
        started.append(process)
        return process

    yield _spawn
    kill_all(started)


def finish(process: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = process.communicate(timeout=TIMEOUT)
    return process.returncode, json.loads(out.strip().splitlines()[-1]), err


def terminate_while_held(process: subprocess.Popen[str], proxy: ScriptedProxy) -> None:
    """Wait for the held request, SIGTERM the process, and let the request through once it took the signal."""
    wait_until(proxy.held.is_set, TIMEOUT)
    process.send_signal(signal.SIGTERM)
    wait_until(lambda: signal_delivered(process.pid, signal.SIGTERM), TIMEOUT)
    proxy.release()


def nothing_running(queue: Pail) -> bool:
    return not queue.store.list(queue.keys.prefix(RUN)).items


CLAIM_STEPS = [
    ("LIST", "queue/"),
    ("GET", "queue/"),
    ("PUT", "run/"),
    ("DELETE", "queue/"),
    ("HEAD", "done/"),
]
SETTLE_STEPS = [("PUT", "done/", "signal"), ("DELETE", "run/", "max_jobs")]
"""The step held, and why the drain stopped: on the result's PUT the signal stops it; the
lease's removal is sent once the job is recorded and the drain has stopped for max_jobs (the
job count), and the signal meets it while the drain waits for that removal (its flush)."""


@pytest.mark.parametrize(
    ("method", "prefix"), CLAIM_STEPS, ids=[f"{m} {p}" for m, p in CLAIM_STEPS]
)
def test_given_sigterm_during_the_claim_when_work_once_then_the_job_goes_back_unstarted(
    spawn: Callable[..., subprocess.Popen[str]],
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    method: str,
    prefix: str,
) -> None:
    queue = connect(max_retries=0)  # a spent attempt would dead-letter it
    job_id = queue.enqueue({"n": 1})
    proxy.script = hold(method, prefix)
    process = spawn("work-once", "--handler", "tests.aws.job_handlers:double")

    terminate_while_held(process, proxy)
    code, summary, err = finish(process)

    assert code == 0, err
    assert (summary["processed"], summary["returned"], summary["stop_reason"]) == (0, 1, "signal")
    status = queue.status(job_id)
    assert status is not None
    assert (status.state, status.attempts, status.error) == (JobState.PENDING, 0, None)
    assert nothing_running(queue)


@pytest.mark.parametrize(
    ("method", "prefix", "stopped"), SETTLE_STEPS, ids=[f"{m} {p}" for m, p, _ in SETTLE_STEPS]
)
def test_given_sigterm_while_the_result_is_recorded_when_work_once_then_the_job_is_done(
    spawn: Callable[..., subprocess.Popen[str]],
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    method: str,
    prefix: str,
    stopped: str,
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 4})
    proxy.script = hold(method, prefix)
    process = spawn("work-once", "--handler", "tests.aws.job_handlers:double")

    terminate_while_held(process, proxy)
    code, summary, err = finish(process)

    assert code == 0, err
    assert (summary["processed"], summary["succeeded"], summary["stop_reason"]) == (
        1,
        1,
        stopped,
    )
    assert queue.result(job_id) == {"doubled": 8}
    assert nothing_running(queue)


def test_given_a_second_sigterm_while_the_lease_is_released_then_the_release_completes(
    spawn: Callable[..., subprocess.Popen[str]],
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    tmp_path: Path,
) -> None:
    queue = connect()
    started = tmp_path / "started"
    job_id = queue.enqueue({"started": str(started), "go": str(tmp_path / "go"), "wait": TIMEOUT})
    process = spawn(
        "work-once", "--handler", "tests.aws.job_handlers:slow", "--grace-period", "0.2"
    )
    wait_until(started.exists, TIMEOUT)
    proxy.script = hold("PUT", "run/")  # the release's decision, once the grace period is over

    process.send_signal(signal.SIGTERM)
    terminate_while_held(process, proxy)
    code, summary, err = finish(process)

    assert code == 0, err
    assert (summary["processed"], summary["released"], summary["stop_reason"]) == (1, 1, "signal")
    status = queue.status(job_id)
    assert status is not None and (status.state, status.attempts) == (JobState.PENDING, 1)
    assert status.error is not None and status.error.type == "LeaseReleased"
    assert nothing_running(queue)


@pytest.mark.parametrize(
    ("method", "prefix", "jobs"),
    [("LIST", "queue/", 0), ("PUT", "run/", 1)],
    ids=["polling an empty queue", "claiming"],
)
def test_given_sigterm_on_the_service_when_it_polls_or_claims_then_it_exits_0_with_nothing_running(
    spawn: Callable[..., subprocess.Popen[str]],
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    method: str,
    prefix: str,
    jobs: int,
) -> None:
    queue = connect()
    ids = [queue.enqueue({"n": n}) for n in range(jobs)]
    proxy.script = hold(method, prefix)
    process = spawn("work", "--handler", "tests.aws.job_handlers:double", "--poll-interval", "0.2")

    terminate_while_held(process, proxy)
    code, summary, err = finish(process)

    assert code == 0, err
    assert (summary["processed"], summary["returned"], summary["stop_reason"]) == (
        0,
        jobs,
        "signal",
    )
    for job_id in ids:
        status = queue.status(job_id)
        assert status is not None and (status.state, status.attempts) == (JobState.PENDING, 0)
    assert nothing_running(queue)
