"""Every public API call, against the real local S3 server."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from pail import (
    ConfigurationError,
    Ending,
    JobNotFoundError,
    JobState,
    Mode,
    Pail,
    PayloadError,
)
from pail.ids import is_ulid


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    return {"report_id": payload["report_id"], "url": f"reports/{payload['report_id']}.pdf"}


def test_given_payload_when_enqueue_then_returns_ulid_and_job_is_pending(pail: Pail) -> None:
    job_id = pail.enqueue({"report_id": "q2_revenue", "format": "pdf"})

    assert is_ulid(job_id)
    status = pail.status(job_id)
    assert status is not None
    assert status.state is JobState.PENDING
    assert status.attempts == 0
    assert status.enqueued_at is not None
    assert pail.result(job_id) is None


def test_given_pending_job_when_work_once_then_result_is_handler_return(pail: Pail) -> None:
    job_id = pail.enqueue({"report_id": "q2"})

    assert pail.work_once(build_report) is True

    assert pail.result(job_id) == {"report_id": "q2", "url": "reports/q2.pdf"}
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.DONE and status.attempts == 1
    assert pail.work_once(build_report) is False


def test_given_handler_returning_none_when_done_then_result_is_empty_dict(pail: Pail) -> None:
    job_id = pail.enqueue({"n": 1})
    pail.work_once(lambda payload: None)
    assert pail.result(job_id) == {}


def test_given_done_job_when_fetching_result_url_then_body_is_result(pail: Pail) -> None:
    job_id = pail.enqueue({"report_id": "url"})
    pail.work_once(build_report)

    with urllib.request.urlopen(pail.result_url(job_id, expires_in=60)) as response:
        assert json.loads(response.read()) == build_report({"report_id": "url"})


def test_given_pending_job_when_fetching_status_urls_then_only_pending_answers(pail: Pail) -> None:
    job_id = pail.enqueue({"x": 1})
    urls = pail.status_urls(job_id, expires_in=60)

    with urllib.request.urlopen(urls["pending"]) as response:
        assert json.loads(response.read())["payload"] == {"x": 1}
    for state in ("running", "done", "failed"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(urls[state])
        assert info.value.code == 404


def test_given_mixed_jobs_when_stats_then_counts_each_state(connect: Callable[..., Pail]) -> None:
    pail = connect(max_retries=0)
    for ok in (True, False, True):
        pail.enqueue({"ok": ok})

    def handler(payload: dict[str, bool]) -> dict[str, bool]:
        if not payload["ok"]:
            raise RuntimeError("bad input")
        return payload

    while pail.work_once(handler):
        pass
    pail.flush()  # the last lease removal, which work_once leaves in flight
    pail.enqueue({"ok": True})

    stats = pail.stats()
    assert (stats.pending, stats.running, stats.done, stats.failed) == (1, 0, 2, 1)
    assert stats.oldest_pending is not None


def test_given_claimed_message_when_complete_then_done(pail: Pail) -> None:
    job_id = pail.enqueue({"step": "raw"})

    message = pail.claim()
    assert message is not None
    assert (message.id, message.payload, message.attempt) == (job_id, {"step": "raw"}, 1)
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.RUNNING

    assert message.complete({"ok": 1}) is True
    assert pail.result(job_id) == {"ok": 1}
    assert pail.claim() is None


def test_given_claimed_message_when_fail_then_back_in_queue_with_error(pail: Pail) -> None:
    job_id = pail.enqueue({"step": "raw"})
    message = pail.claim()
    assert message is not None

    assert message.fail(ValueError("disk full")) is Ending.REQUEUED

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 1
    assert status.error is not None
    assert (status.error.type, status.error.message) == ("ValueError", "disk full")
    assert "ValueError: disk full" in status.error.traceback
    again = pail.claim()
    assert again is not None and again.id == job_id and again.attempt == 2
    again.complete()


def test_given_always_failing_handler_when_retried_then_dead_lettered_after_1_plus_max_retries(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=3)
    job_id = pail.enqueue({"report_id": "broken"})
    runs: list[int] = []

    def always_fails(payload: Any) -> None:
        runs.append(1)
        raise RuntimeError("renderer crashed")

    while pail.work_once(always_fails):
        pass

    assert len(runs) == 4
    assert pail.stats().failed == 1
    assert pail.result(job_id) is None
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.FAILED and status.attempts == 4
    assert status.error is not None and status.error.message == "renderer crashed"
    [letter] = pail.dead_letters()
    assert (letter.job_id, letter.payload, letter.attempts) == (job_id, {"report_id": "broken"}, 4)


def test_given_dead_letter_when_redrive_then_it_runs_again_and_succeeds(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    job_id = pail.enqueue({"n": 7})
    pail.work_once(lambda p: 1 / 0)
    assert pail.stats().failed == 1

    assert pail.redrive(job_id) == [job_id]

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 0
    assert pail.work_once(lambda p: {"n": p["n"] * 2}) is True
    assert pail.result(job_id) == {"n": 14}
    stats = pail.stats()
    assert (stats.done, stats.failed) == (1, 0)


def test_given_several_dead_letters_when_redrive_all_then_all_pending(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    ids = {pail.enqueue({"i": i}) for i in range(3)}
    while pail.work_once(lambda p: 1 / 0):
        pass

    assert set(pail.redrive(all=True)) == ids
    assert pail.stats().pending == 3


def test_given_unknown_id_when_redrive_then_job_not_found(pail: Pail) -> None:
    with pytest.raises(JobNotFoundError):
        pail.redrive("01JD8X3W5K9T2B7Q4R6M0N1P2S")
    with pytest.raises(ConfigurationError):
        pail.redrive()


def test_given_unknown_id_when_status_then_none(pail: Pail) -> None:
    assert pail.status("01JD8X3W5K9T2B7Q4R6M0N1P2S") is None
    assert pail.result("01JD8X3W5K9T2B7Q4R6M0N1P2S") is None


def test_given_standard_and_directory_bucket_names_then_mode_follows_suffix() -> None:
    assert Mode.for_bucket("jobs") is Mode.STANDARD
    assert Mode.for_bucket("jobs--use1-az4--x-s3") is Mode.EXPRESS


def test_given_namespaces_when_enqueue_then_queues_are_isolated(
    connect: Callable[..., Pail],
) -> None:
    reports, exports = connect(queue="reports"), connect(queue="exports")
    job_id = reports.enqueue({"kind": "report"})

    assert exports.work_once(lambda p: p) is False
    assert exports.status(job_id) is None
    assert reports.work_once(lambda p: p) is True
    assert reports.result(job_id) == {"kind": "report"}
    assert reports.store.head(f"reports/done/{job_id}") is not None


def test_given_unserialisable_payload_when_enqueue_then_payload_error_and_nothing_written(
    pail: Pail,
) -> None:
    with pytest.raises(PayloadError, match="not JSON-serialisable"):
        pail.enqueue({"when": object()})
    assert pail.stats().pending == 0
