"""pailq 0.1.1's five examples (``/work/shared/reference/EXAMPLES.md``), run unchanged against pail.

Each example in ``examples/`` is a script as 0.1.1 shipped it: ``Pail.connect(BUCKET)``
and the 0.1.1 API only. It runs in a process of its own on the real local server
(boto3 finds it through ``AWS_ENDPOINT_URL``, as a user's environment would say
where S3 is), and the test checks what a user of 0.1.1 saw.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from pail import Pail
from pail.local import LocalS3
from tests.servers import make_s3_client
from tests.support.command import ROOT, process_env

TIMEOUT = 120.0
"""A bound on one example's run (each takes a few seconds: a 2 s handler, 2 s polls)."""


@pytest.fixture
def example_env(s3_server: LocalS3, bucket: str) -> dict[str, str]:
    return process_env(
        {**s3_server.env(), "AWS_ENDPOINT_URL": s3_server.endpoint_url, "BUCKET": bucket}
    )


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _start(
    name: str, env: dict[str, str], started: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", f"tests.compat.examples.{name}"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(process)
    return process


def _run(name: str, env: dict[str, str], started: list[subprocess.Popen[str]]) -> str:
    process = _start(name, env, started)
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err
    return out


def _queue(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail(bucket, make_s3_client(s3_server.connect_kwargs()))


def test_given_the_producer_and_the_service_worker_then_the_producer_prints_the_result(
    example_env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    worker = _start("worker_service", example_env, started)

    out = _run("producer", example_env, started)

    lines = out.splitlines()
    assert lines[0].startswith("enqueued ") and len(lines[0].split()[1]) == 26
    assert lines[-1] == "{'report_id': 'q2_revenue', 'url': 'reports/q2_revenue.pdf'}"
    assert worker.poll() is None  # it serves on, forever


def test_given_a_job_when_worker_once_runs_twice_then_it_processes_it_and_then_finds_none(
    s3_server: LocalS3,
    bucket: str,
    example_env: dict[str, str],
    started: list[subprocess.Popen[str]],
) -> None:
    job_id = _queue(s3_server, bucket).enqueue({"report_id": "q3", "format": "pdf"})

    first = _run("worker_once", example_env, started)
    second = _run("worker_once", example_env, started)

    assert first.strip() == "processed one job, exiting"
    assert second.strip() == "queue empty, nothing to do"
    assert _queue(s3_server, bucket).result(job_id) == {"report_id": "q3", "url": "reports/q3.pdf"}


def test_given_a_good_and_a_failing_job_when_the_primitives_loop_runs_then_one_completes_and_one_goes_back(
    s3_server: LocalS3,
    bucket: str,
    example_env: dict[str, str],
    started: list[subprocess.Popen[str]],
) -> None:
    pail = _queue(s3_server, bucket)
    good = pail.enqueue({"report_id": "q1"})
    bad = pail.enqueue({"report_id": "q2", "fail": True})

    out = _run("primitives", {**example_env, "ROUNDS": "2"}, started)

    assert f"completed {good}" in out and f"failed {bad}" in out
    assert pail.result(good) == {"report_id": "q1"}
    pending, running, done, failed, _ = pail.stats()
    assert (pending, running, done, failed) == (1, 0, 1, 0)  # the failing job is back in the queue


def test_given_a_job_that_always_fails_when_the_retries_example_runs_then_4_runs_and_a_dlq_of_1(
    example_env: dict[str, str], started: list[subprocess.Popen[str]]
) -> None:
    out = _run("retries", example_env, started)

    assert out.splitlines() == ["handler ran 4 times", "DLQ depth: 1"]
