"""The ``pail`` console script as a real process: help, exit codes, waiting, signals, the server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from tests.cli.handlers import double
from tests.support.command import LineReader, Spawn, pail_script, process_env, start, stop


@pytest.fixture
def env(s3_server: LocalS3) -> dict[str, str]:
    return process_env(s3_server.env())


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [pail_script(), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_given_help_when_run_then_lists_every_command_and_the_exit_codes(
    env: dict[str, str],
) -> None:
    result = run(["--help"], env)

    assert result.returncode == 0
    for command in (
        "enqueue", "status", "result", "url", "stats", "dlq", "reap",
        "work", "work-once", "server", "demo",
    ):  # fmt: skip
        assert f"\n  {command} " in result.stdout
    assert "Exit codes:" in result.stdout and "130  interrupted" in result.stdout


def test_given_unknown_job_when_status_then_exit_3_and_exactly_one_stderr_line(
    env: dict[str, str], bucket: str
) -> None:
    result = run(["status", bucket, "01JD8X3W5K9T2B7Q4R6M0N1P2S"], env)

    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: no job 01JD8X3W5K9T2B7Q4R6M0N1P2S in s3://{bucket}/ "
        "(wrong bucket or --queue, or its objects expired?)"
    ]


def test_given_debug_when_a_command_fails_then_the_traceback_is_shown(
    env: dict[str, str],
) -> None:
    plain = run(["stats", "no-such-bucket-here"], env)
    debug = run(["--debug", "stats", "no-such-bucket-here"], env)

    assert plain.returncode == debug.returncode == 3
    assert "Traceback" not in plain.stderr
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("error: bucket 'no-such-bucket-here'")


def test_given_result_wait_when_a_worker_finishes_the_job_then_it_prints_the_result(
    env: dict[str, str], connect: Callable[..., Pail], bucket: str, spawn: Spawn
) -> None:
    pail = connect()
    job_id = pail.enqueue({"n": 21})
    process = spawn([pail_script(), "result", bucket, job_id, "--wait", "--timeout", "60"], env)
    stderr = LineReader(process.stderr)  # type: ignore[arg-type]

    stderr.wait_for(f"waiting for job {job_id}")
    assert pail.work_once(double) is True
    stdout, _ = process.communicate(timeout=60)

    assert process.returncode == 0
    assert json.loads(stdout) == {"n": 42}


def test_given_sigterm_during_a_job_when_work_then_the_job_finishes_and_exit_0(
    env: dict[str, str], connect: Callable[..., Pail], bucket: str, tmp_path: Path, spawn: Spawn
) -> None:
    pail = connect()
    marker = tmp_path / "go"
    job_id = pail.enqueue({"path": str(marker)})
    process = spawn(
        [pail_script(), "work", bucket, "--handler", "tests.cli.handlers:wait_for_file"], env
    )
    stderr = LineReader(process.stderr)  # type: ignore[arg-type]

    stderr.wait_for("handler started")
    process.send_signal(signal.SIGTERM)
    stderr.wait_for("SIGTERM received")
    marker.touch()
    stdout, _ = process.communicate(timeout=60)

    assert process.returncode == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["processed"] == 1 and summary["stop_reason"] == "signal"
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.DONE


def test_given_work_once_on_empty_queue_when_run_then_exit_0_with_summary(
    env: dict[str, str], bucket: str
) -> None:
    result = run(["work-once", bucket, "--handler", "tests.cli.handlers:double"], env)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["stop_reason"] == "empty"


def test_given_server_command_when_started_then_it_serves_s3_until_terminated(
    env: dict[str, str],
) -> None:
    process = start([pail_script(), "server", "--port", "0"], env)
    try:
        stdout = LineReader(process.stdout)  # type: ignore[arg-type]
        endpoint = stdout.wait_for("listening on").split()[-1]  # the port the server bound
        port = int(endpoint.rsplit(":", 1)[1])
        assert port != 0
        stderr = LineReader(process.stderr)  # type: ignore[arg-type]
        assert stderr.wait_for("PAIL_ENDPOINT_URL=").split("=", 1)[1].strip() == endpoint
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="y",
            region_name="us-east-1",
        ).create_bucket(Bucket="served")
        pail = Pail.connect(
            "served", endpoint_url=endpoint, access_key_id="x", secret_access_key="y"
        )
        job_id = pail.enqueue({"n": 1})
        second = run(["server", "--port", str(port)], env)
        assert second.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
        assert pail.status(job_id) is not None
    finally:
        stop(process)


def test_given_python_m_pail_cli_when_version_then_prints_it(env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pail.cli", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0
    assert result.stdout.startswith("pail, version ")
