"""When S3 fails: the entry points say so (exit code, failed invocation) or back off, never lose a job."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from pail import BucketNotFoundError, MemoryStore, Pail, StorageError
from pail.aws.lambda_worker import lambda_worker
from pail.aws.reaper import ReaperFunction
from pail.cli.exit_codes import EXIT_ERROR, exit_code
from pail.local import LocalS3
from pail.runner import run
from pail.store.base import ListPage
from tests.support.lambdas import FakeContext, LogCapture, emf_records, metric_values
from tests.support.queues import make_client


class FailingListings(MemoryStore):
    """An in-memory store whose next ``failures`` listings fail as S3 would after retries."""

    def __init__(self, failures: int, prefix: str = "") -> None:
        super().__init__("jobs")
        self.failures = failures
        self._prefix = prefix

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        if self.failures > 0 and prefix.startswith(self._prefix):
            self.failures -= 1
            raise StorageError("ListObjectsV2: 503 SlowDown, retries exhausted")
        return super().list(
            prefix, max_keys=max_keys, start_after=start_after, continuation=continuation
        )


def test_given_s3_failing_when_the_worker_lambda_claims_then_the_invocation_fails_after_metrics(
    log_capture: LogCapture, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FailingListings(failures=100)
    queue = Pail(store)
    queue.enqueue({"n": 1})
    handler = lambda_worker(lambda p: p, pail=queue, logger=log_capture.logger)

    with pytest.raises(StorageError, match="SlowDown"):
        handler({}, FakeContext())

    assert metric_values(emf_records(capsys.readouterr().out), "JobsProcessed") == [0]
    store.failures = 0
    assert queue.stats().pending == 1


def test_given_a_missing_bucket_when_the_worker_lambda_runs_then_the_error_names_it(
    s3_server: LocalS3, log_capture: LogCapture
) -> None:
    queue = Pail.connect("no-such-bucket-for-pail", client=make_client(s3_server))
    handler = lambda_worker(lambda p: p, pail=queue, logger=log_capture.logger)

    with pytest.raises(BucketNotFoundError, match="no-such-bucket-for-pail"):
        handler({}, FakeContext())


def test_given_s3_failing_when_work_once_runs_then_it_stops_with_a_storage_error_exit_code() -> (
    None
):
    queue = Pail(FailingListings(failures=100))

    summary = run(queue, lambda p: p, once=True, install_signal_handlers=False)

    assert summary.stop_reason == "storage_error"
    assert exit_code(summary) == EXIT_ERROR


def test_given_s3_failing_for_a_while_when_serving_then_it_backs_off_and_then_serves() -> None:
    store = FailingListings(failures=3)
    queue = Pail(store)
    job_id = queue.enqueue({"n": 1})
    stop = threading.Event()

    def done_then_stop(payload: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return payload

    summary = run(
        queue,
        done_then_stop,
        once=False,
        poll_interval=0.05,
        min_poll_interval=0.01,
        stop=stop,
        install_signal_handlers=False,
    )

    assert (summary.processed, summary.stop_reason) == (1, "stopped")
    assert store.failures == 0
    assert queue.result(job_id) == {"n": 1}


def test_given_a_handler_result_that_is_not_json_when_run_then_the_attempt_fails_with_that_error(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect()
    job_id = queue.enqueue({"n": 1})
    handler = lambda_worker(
        lambda p: {"when": object()}, pail=queue, max_jobs=1, logger=log_capture.logger
    )

    summary = handler({}, FakeContext())

    assert (summary["failed"], summary["retried"]) == (1, 1)
    status = queue.status(job_id)
    assert status is not None and status.error is not None
    assert status.error.type == "PayloadError"


def test_given_reaping_fails_when_the_reaper_runs_then_depth_is_still_published_and_it_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    queue = Pail(FailingListings(failures=1, prefix="run/"))
    queue.enqueue({"n": 1})
    reaper = ReaperFunction(pail=queue, logger=LogCapture().logger)

    with pytest.raises(StorageError, match="SlowDown"):
        reaper({}, None)

    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "PendingJobs") == [1]
    assert metric_values(records, "ExpiredLeases") == [0]
