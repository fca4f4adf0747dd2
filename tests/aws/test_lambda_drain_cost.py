"""What one worker Lambda invocation does with a backlog: jobs per invocation, requests per job.

The figure in docs/serverless.md comes from this test (run it with ``-s`` to see it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from pail import Pail
from pail.aws.lambda_worker import lambda_worker
from pail.local import LocalS3
from tests.support.counting import RequestCounter
from tests.support.lambdas import FakeContext, LogCapture, emf_records, metric_values
from tests.support.queues import make_client

JOBS = 100
JOB_SECONDS = 0.05


@pytest.mark.slow
def test_given_100_pending_jobs_of_50_ms_when_one_invocation_runs_then_it_drains_them_cheaply(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    log_capture: LogCapture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    producer = connect()
    ids = [producer.enqueue({"n": n}) for n in range(JOBS)]
    counter = RequestCounter()
    worker_queue = Pail.connect(bucket, client=counter.attach(make_client(s3_server)))

    def fifty_ms(payload: dict[str, Any]) -> dict[str, Any]:
        time.sleep(JOB_SECONDS)  # the job's work
        return {"n": payload["n"]}

    handler = lambda_worker(fifty_ms, pail=worker_queue, logger=log_capture.logger)
    started = time.monotonic()
    summary = handler({}, FakeContext(remaining=900))
    elapsed = time.monotonic() - started
    stdout = capsys.readouterr().out

    per_job = counter.total() / JOBS
    with capsys.disabled():  # the figure, printed in the test log
        print(
            f"\n{JOBS} jobs of {JOB_SECONDS * 1000:.0f} ms, one invocation: "
            f"processed {summary['processed']}, {elapsed:.2f} s, "
            f"{per_job:.2f} S3 requests per job, {elapsed / JOBS * 1000:.1f} ms per job; "
            f"by operation: {dict(sorted(counter.by_operation.items()))}"
        )
    assert summary["processed"] == JOBS
    assert summary["succeeded"] == JOBS
    assert summary["stop_reason"] == "empty"
    assert all(producer.result(job_id) == {"n": n} for n, job_id in enumerate(ids))
    # A claim is GET queue/, PUT run/ (create-only), DELETE queue/ (If-Match) and HEAD done/;
    # a completion is PUT done/ (create-only) and DELETE run/ (If-Match). One LIST serves many
    # claims. With one worker no condition fails, and 50 ms jobs need no lease renewal.
    # LISTs: the page, the one that finds queue/ empty, and this Pail's first reclaim pass
    # (reclaim is on here, as for a bare Pail; the construct sets PAIL_RECLAIM=false): run/
    # and wait/ (pail.protocol.reclaim).
    assert counter.by_operation["PutObject"] == 2 * JOBS
    assert counter.by_operation["ListObjectsV2"] <= 4
    assert per_job <= 6.1
    # Every job's duration is published, across EMF records (Powertools splits at 100 values).
    durations = metric_values(emf_records(stdout), "JobDuration")
    assert len(durations) == JOBS
    assert min(durations) >= JOB_SECONDS * 1000
