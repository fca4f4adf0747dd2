"""The worker Lambda, invoked in-process against the real local S3 server."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import pail
from pail import JobState, Pail
from pail.aws.lambda_worker import lambda_worker
from pail.drain import current_job
from pail.local import LocalS3
from tests.support.counting import RequestCounter
from tests.support.lambdas import FakeContext, LogCapture, emf_records, metric_values
from tests.support.queues import make_client


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"doubled": payload["n"] * 2}


def test_given_five_pending_jobs_when_invoked_then_one_invocation_drains_them_all(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    ids = [queue.enqueue({"n": n}) for n in range(5)]
    handler = lambda_worker(double, pail=queue, logger=log_capture.logger)

    summary = handler({}, FakeContext(remaining=900))

    assert summary["processed"] == 5
    assert summary["succeeded"] == 5
    assert summary["failed"] == 0
    assert summary["stop_reason"] == "empty"
    assert [queue.result(job_id) for job_id in ids] == [{"doubled": 2 * n} for n in range(5)]
    stats = queue.stats()
    assert (stats.pending, stats.running, stats.done) == (0, 0, 5)


def test_given_jobs_that_take_ten_seconds_when_35_seconds_remain_then_it_stops_at_the_margin(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    ids = [queue.enqueue({"n": n}) for n in range(5)]
    context = FakeContext(remaining=35)

    def ten_seconds(payload: dict[str, Any]) -> dict[str, Any]:
        context.advance(10)
        return double(payload)

    handler = lambda_worker(ten_seconds, pail=queue, safety_margin=10, logger=log_capture.logger)
    summary = handler({}, context)

    # 35 s left: start (25 left), start (15 left), start (5 left), then 5 < 10: no claim.
    assert summary["processed"] == 3
    assert summary["succeeded"] == 3
    assert summary["released"] == 0
    assert summary["stop_reason"] == "time_budget"
    states = [queue.status(job_id) for job_id in ids]
    assert sorted(s.state for s in states if s) == [JobState.DONE] * 3 + [JobState.PENDING] * 2
    assert all(s.attempts == 0 for s in states if s and s.state is JobState.PENDING)


def test_given_a_job_still_running_near_the_end_when_time_runs_out_then_its_lease_is_released(
    connect: Callable[..., Pail], log_capture: LogCapture, gate: threading.Event
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 1})
    context = FakeContext(remaining=20)

    def overruns(payload: dict[str, Any]) -> None:
        context.advance(16)  # 4 s left: below the 5 s release reserve (half the margin)
        gate.wait(60)

    handler = lambda_worker(overruns, pail=queue, safety_margin=10, logger=log_capture.logger)
    summary = handler({}, context)

    assert summary["processed"] == 1
    assert summary["released"] == 1
    assert summary["failed"] == 1
    assert summary["retried"] == 1
    assert summary["stop_reason"] == "time_budget"
    status = queue.status(job_id)
    assert status is not None
    assert status.state is JobState.PENDING
    assert status.attempts == 1
    assert status.error is not None
    assert status.error.type == "LeaseReleased"
    assert "Lambda invocation" in status.error.message
    # Claimable again at once: no waiting for the lease to expire.
    message = connect().claim()
    assert message is not None
    assert (message.id, message.attempt) == (job_id, 2)
    assert message.complete({"second": "attempt"})
    released = [r for r in log_capture.records() if r["message"] == "job released"]
    assert len(released) == 1
    assert released[0]["job_id"] == job_id


def test_given_a_cooperative_handler_when_time_runs_low_then_it_is_told_to_stop_before_release(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 1})
    context = FakeContext(remaining=20)

    def checkpoints(payload: dict[str, Any]) -> dict[str, Any]:
        job = current_job()
        assert job is not None and job.message.id == job_id
        context.advance(12)  # 8 s left: under the 10 s margin, above the 5 s release point
        if not job.stopping.wait(30):
            raise AssertionError("never told to stop")
        return {"stopped_at": "a checkpoint"}

    handler = lambda_worker(checkpoints, pail=queue, safety_margin=10, logger=log_capture.logger)
    summary = handler({}, context)

    assert (summary["succeeded"], summary["released"], summary["stop_reason"]) == (
        1,
        0,
        "time_budget",
    )
    assert queue.result(job_id) == {"stopped_at": "a checkpoint"}


def test_given_a_handler_that_raises_when_invoked_then_its_error_is_recorded_and_the_drain_goes_on(
    connect: Callable[..., Pail], log_capture: LogCapture, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = connect(max_retries=1)
    bad = queue.enqueue({"n": 1, "fail": True})
    good = queue.enqueue({"n": 2})

    def picky(payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("fail"):
            raise ValueError("no report for this input")
        return double(payload)

    handler = lambda_worker(picky, pail=queue, logger=log_capture.logger)
    summary = handler({}, FakeContext())

    # The bad job: attempt 1 fails and is requeued, attempt 2 fails and is dead-lettered.
    assert summary["processed"] == 3
    assert summary["succeeded"] == 1
    assert summary["failed"] == 2
    assert summary["retried"] == 1
    assert summary["dead_lettered"] == 1
    assert summary["stop_reason"] == "empty"
    assert queue.result(good) == {"doubled": 4}
    status = queue.status(bad)
    assert status is not None
    assert status.state is JobState.FAILED
    assert status.attempts == 2
    assert status.error is not None
    assert (status.error.type, status.error.message) == ("ValueError", "no report for this input")
    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "JobsProcessed") == [3]
    assert metric_values(records, "JobsFailed") == [2]
    assert metric_values(records, "JobsRetried") == [1]
    assert metric_values(records, "JobsDeadLettered") == [1]


def test_given_a_drain_when_it_ends_then_emf_metrics_carry_only_the_queue_dimension(
    connect: Callable[..., Pail],
    log_capture: LogCapture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "reports")  # must not become a dimension
    queue = connect(queue="reports")
    for n in range(3):
        queue.enqueue({"n": n})
    handler = lambda_worker(double, pail=queue, logger=log_capture.logger)

    handler({}, FakeContext())

    records = emf_records(capsys.readouterr().out)
    assert len(records) == 1
    record = records[0]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Pail"
    assert directive["Dimensions"] == [["queue"]]
    assert record["queue"] == "reports"
    units = {metric["Name"]: metric["Unit"] for metric in directive["Metrics"]}
    assert units == {
        "JobsProcessed": "Count",
        "JobsFailed": "Count",
        "JobsRetried": "Count",
        "JobsDeadLettered": "Count",
        "JobsReleased": "Count",
        "JobsReturned": "Count",
        "JobDuration": "Milliseconds",
    }
    assert metric_values(records, "JobsProcessed") == [3]
    assert metric_values(records, "JobsFailed") == [0]
    durations = metric_values(records, "JobDuration")
    assert len(durations) == 3
    assert all(d >= 0 for d in durations)


def test_given_an_empty_queue_when_invoked_then_one_list_suffices_and_zero_counts_are_published(
    s3_server: LocalS3,
    bucket: str,
    log_capture: LogCapture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    counter = RequestCounter()
    # PAIL_SHARDS and PAIL_RECLAIM as PailQueue sets them: no read of the layout marker,
    # and no reclaim pass (the construct's scheduled reaper reclaims).
    queue = Pail.connect(
        bucket, client=counter.attach(make_client(s3_server)), shards=1, reclaim=False
    )
    handler = lambda_worker(double, pail=queue, logger=log_capture.logger)

    summary = handler({}, FakeContext())

    assert (summary["processed"], summary["stop_reason"]) == (0, "empty")
    assert dict(counter.by_operation) == {"ListObjectsV2": 1}
    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "JobsProcessed") == [0]
    assert metric_values(records, "JobDuration") == []


def test_given_jobs_when_they_run_then_every_log_line_carries_job_id_attempt_and_queue(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect(queue="reports", max_retries=3)
    ok = queue.enqueue({"n": 1})
    bad = queue.enqueue({"n": 2, "fail": True})
    logger = log_capture.logger
    runtime_logger = logging.getLogger("pail.example")

    def chatty(payload: dict[str, Any]) -> dict[str, Any]:
        logger.info("building the report")  # the handler's own Powertools logger
        runtime_logger.warning("a line from the pail runtime's loggers")
        if payload.get("fail"):
            raise RuntimeError("boom")
        return double(payload)

    handler = lambda_worker(chatty, pail=queue, max_jobs=2, logger=logger)
    handler({}, FakeContext())

    records = log_capture.records()
    assert all(r["queue"] == "reports" for r in records)
    inside = False
    seen: set[str] = set()
    for record in records:
        if record["message"] == "job started":
            inside = True
        if inside:
            assert record["job_id"] in (ok, bad), record
            assert record["attempt"] == 1, record
            seen.add(record["job_id"])
        else:
            assert "job_id" not in record, record
        if record["message"] in ("job succeeded", "job failed", "job released"):
            inside = False
    assert seen == {ok, bad}
    from_runtime = [r for r in records if r["message"] == "a line from the pail runtime's loggers"]
    assert len(from_runtime) == 2
    assert {r["job_id"] for r in from_runtime} == {ok, bad}
    failed = next(r for r in records if r["message"] == "job failed")
    assert failed["error"] == "RuntimeError: boom"
    assert failed["ending"] == "requeued"
    # The routing of the runtime's loggers ends with the invocation.
    assert logging.getLogger("pail").handlers == []
    assert logging.getLogger("pail").propagate is True


def test_given_a_hanging_handler_when_the_job_timeout_passes_then_the_attempt_fails(
    connect: Callable[..., Pail], log_capture: LogCapture, gate: threading.Event
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 1})
    handler = lambda_worker(
        lambda payload: gate.wait(60), pail=queue, job_timeout=0.3, logger=log_capture.logger
    )

    summary = handler({}, FakeContext())

    assert summary["processed"] >= 1
    status = queue.status(job_id)
    assert status is not None
    assert status.error is not None
    assert status.error.type == "HandlerTimeoutError"


def test_given_only_the_environment_when_invoked_then_it_configures_itself_from_it(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    monkeypatch: pytest.MonkeyPatch,
    log_capture: LogCapture,
) -> None:
    for name, value in {
        **s3_server.env(),
        "PAIL_BUCKET": bucket,
        "PAIL_QUEUE": "envq",
        "PAIL_MAX_JOBS": "2",
        "PAIL_SAFETY_MARGIN_SECONDS": "5",
    }.items():
        monkeypatch.setenv(name, value)
    producer = connect(queue="envq")
    for n in range(3):
        producer.enqueue({"n": n})
    handler = pail.lambda_worker(double, logger=log_capture.logger)

    summary = handler({}, FakeContext())

    assert (summary["processed"], summary["stop_reason"], summary["queue"]) == (
        2,
        "max_jobs",
        "envq",
    )
    assert producer.stats().pending == 1


def test_given_a_missing_bucket_setting_when_invoked_then_a_configuration_error_says_so() -> None:
    handler = lambda_worker(double, env={})

    with pytest.raises(pail.ConfigurationError, match="PAIL_BUCKET"):
        handler({}, FakeContext())


def test_given_tracing_switched_on_when_invoked_outside_lambda_then_it_still_drains(
    connect: Callable[..., Pail], log_capture: LogCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAIL_TRACING", "true")
    queue = connect()
    job_id = queue.enqueue({"n": 4})
    handler = lambda_worker(double, pail=queue, logger=log_capture.logger)

    summary = handler({}, FakeContext())

    assert summary["succeeded"] == 1
    assert queue.result(job_id) == {"doubled": 8}


def test_given_import_pail_when_the_worker_template_is_made_then_powertools_is_not_imported() -> (
    None
):
    code = (
        "import sys, pail\n"
        "handler = pail.lambda_worker(lambda payload: payload)\n"
        "print('aws_lambda_powertools' in sys.modules, type(handler).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["False", "LambdaWorker"]
