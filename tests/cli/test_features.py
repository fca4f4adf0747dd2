"""``pail cancel`` and ``pail enqueue --key`` against the real local S3 server."""

from __future__ import annotations

import json

from pail import JobState, Pail
from tests.support.command import Invoke


def test_given_pending_job_when_cancel_then_it_is_cancelled_and_never_runs(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"report": "q2"})

    result = invoke("cancel", bucket, job_id)

    assert result.exit_code == 0
    assert result.stdout.strip() == f"cancelled {job_id}"
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.claim() is None


def test_given_done_job_when_cancel_then_exit_7_too_late_and_the_result_stays(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"report": "q2"})
    pail.work_once(lambda payload: "ok")

    result = invoke("--json", "cancel", bucket, job_id)

    assert result.exit_code == 7
    assert result.stdout == ""
    assert (
        result.stderr == f"error: job {job_id} had already finished (done); nothing was cancelled\n"
    )
    assert pail.result(job_id) == "ok"


def test_given_unknown_id_when_cancel_then_exit_3_with_one_unquoted_line(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("cancel", bucket, "01J00000000000000000000000")

    assert result.exit_code == 3
    assert result.stderr == (
        f"error: no job 01J00000000000000000000000 in s3://{bucket}/ "
        "(wrong bucket or --queue, or its objects expired?)\n"
    )


def test_given_cancelled_job_when_cancel_again_then_exit_0_saying_already_cancelled(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"report": "q2"})

    first = invoke("cancel", bucket, job_id)
    again = invoke("cancel", bucket, job_id)
    again_json = invoke("--json", "cancel", bucket, job_id)

    assert first.exit_code == again.exit_code == again_json.exit_code == 0
    assert first.stdout == f"cancelled {job_id}\n"
    assert again.stdout == f"{job_id} was already cancelled\n"
    assert json.loads(again_json.stdout) == {
        "id": job_id,
        "cancelled": True,
        "already": True,
        "state": "cancelled",
    }


def test_given_key_when_enqueue_twice_then_one_job_and_the_second_says_so(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    first = invoke("--json", "enqueue", bucket, '{"order": 42}', "--key", "order-42")
    second = invoke("enqueue", bucket, '{"order": 42}', "--key", "order-42")

    assert first.exit_code == second.exit_code == 0
    created = json.loads(first.stdout)
    assert created["created"] is True
    assert second.stdout.strip() == created["id"]
    assert "already used" in second.stderr
    assert pail.stats().pending == 1


def test_given_key_and_many_lines_when_enqueue_then_usage_error(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    result = invoke("enqueue", bucket, "-", "--lines", "--key", "k", input='{"n": 1}\n{"n": 2}\n')

    assert result.exit_code == 2
    assert pail.stats().pending == 0


def test_given_delay_when_enqueue_then_the_job_waits(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    result = invoke("enqueue", bucket, '{"n": 1}', "--delay", "3600")

    assert result.exit_code == 0
    status = pail.status(result.stdout.strip())
    assert status is not None and status.state is JobState.PENDING
    assert pail.claim() is None


def test_given_high_priority_when_enqueue_then_it_is_claimed_first(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})
    result = invoke("enqueue", bucket, '{"n": 2}', "--priority", "high")

    message = pail.claim()

    assert message is not None and message.id == result.stdout.strip()
    message.complete()
