"""pailq 0.1.1's five example patterns, run as scripts against the local server.

Each script in ``examples/original`` is the original's example, unchanged but
for where the bucket comes from; each test checks what a user of the
original sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from tests.support.command import kill_all
from tests.support.waiting import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "original"


@pytest.fixture
def env(s3_server: LocalS3, bucket: str) -> dict[str, str]:
    kwargs = s3_server.connect_kwargs()
    return {
        **os.environ,
        "BUCKET": bucket,
        "AWS_ENDPOINT_URL": kwargs["endpoint_url"],
        "AWS_ACCESS_KEY_ID": kwargs["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": kwargs["secret_access_key"],
        "AWS_DEFAULT_REGION": kwargs["region"],
        "REPORT_SECONDS": "0.05",
        "POLL_SECONDS": "0.1",
        "IDLE_SECONDS": "0.1",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def pail(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]


def run(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.fixture
def background(env: dict[str, str]) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    kill_all(started)


def start(
    script: str, env: dict[str, str], into: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    into.append(process)
    return process


def test_worker_once_on_an_empty_queue_says_so(env: dict[str, str]) -> None:
    assert run("worker_once.py", env).strip() == "queue empty, nothing to do"


def test_producer_gets_the_result_a_one_shot_worker_produced(
    env: dict[str, str], background: list[subprocess.Popen[str]]
) -> None:
    producer = start("producer.py", env, background)
    assert producer.stdout is not None
    first = producer.stdout.readline()
    assert first.startswith("enqueued ") and len(first.split()[1]) == 26

    assert run("worker_once.py", env).strip() == "processed one job, exiting"

    out, _ = producer.communicate(timeout=30)
    assert producer.returncode == 0
    assert out.strip() == "result: {'report_id': 'q2_revenue', 'url': 'reports/q2_revenue.pdf'}"


def test_worker_service_processes_every_job(
    env: dict[str, str], pail: Pail, background: list[subprocess.Popen[str]]
) -> None:
    ids = [pail.enqueue({"report_id": f"r{i}"}) for i in range(5)]
    start("worker_service.py", env, background)

    wait_until(lambda: all(pail.result(i) is not None for i in ids), timeout=30)

    assert [pail.result(i)["url"] for i in ids] == [f"reports/r{i}.pdf" for i in range(5)]


def test_primitives_complete_good_jobs_and_return_failing_ones_to_the_queue(
    env: dict[str, str], pail: Pail, background: list[subprocess.Popen[str]]
) -> None:
    good = pail.enqueue({"report_id": "ok"})
    bad = pail.enqueue({"no_report_id": True})
    start("primitives.py", env, background)

    def bad_was_retried() -> bool:
        status = pail.status(bad)
        return status is not None and status.attempts >= 2

    wait_until(lambda: pail.result(good) is not None and bad_was_retried(), timeout=30)
    background[0].kill()
    out, _ = background[0].communicate()

    assert f"completed {good}" in out
    assert f"failed {bad}: KeyError('report_id')" in out
    status = pail.status(bad)
    assert status is not None and status.error is not None and status.error.type == "KeyError"


def test_retries_runs_1_plus_3_times_then_dead_letters(env: dict[str, str], pail: Pail) -> None:
    out = run("retries.py", env).splitlines()

    assert out.count("rendering broken") == 4
    assert out[-1] == "dead-lettered: 1"
    [letter] = pail.dead_letters()
    assert letter.attempts == 4 and letter.error is not None
    assert pail.status(letter.job_id).state is JobState.FAILED  # type: ignore[union-attr]
