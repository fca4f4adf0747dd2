"""``pail enqueue``, ``status``, ``result`` and ``url`` against the real local S3 server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from pail import JobState, Pail
from pail.ids import is_ulid
from tests.cli.handlers import double, explode
from tests.support.command import Invoke


def test_given_json_argument_when_enqueue_then_prints_only_the_id_of_a_pending_job(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    result = invoke("enqueue", bucket, '{"report_id": "q2_revenue", "format": "pdf"}')

    assert result.exit_code == 0
    job_id = result.stdout.strip()
    assert is_ulid(job_id)
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    claimed = pail.claim()
    assert claimed is not None and claimed.payload == {"report_id": "q2_revenue", "format": "pdf"}
    claimed.complete()


def test_given_file_and_stdin_when_enqueue_then_both_payloads_are_read(
    invoke: Invoke, pail: Pail, bucket: str, tmp_path: Path
) -> None:
    job_file = tmp_path / "job.json"
    job_file.write_text('{"source": "file"}')

    from_file = invoke("enqueue", bucket, f"@{job_file}")
    from_stdin = invoke("enqueue", bucket, "-", input='{"source": "stdin"}')

    assert from_file.exit_code == from_stdin.exit_code == 0
    seen = {}
    while (message := pail.claim()) is not None:
        seen[message.id] = message.payload
        message.complete()
    assert seen == {
        from_file.stdout.strip(): {"source": "file"},
        from_stdin.stdout.strip(): {"source": "stdin"},
    }


def test_given_json_lines_when_enqueue_lines_then_one_job_per_line_and_one_id_per_line(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    result = invoke("enqueue", bucket, "-", "--lines", input='{"n": 1}\n\n{"n": 2}\n{"n": 3}\n')

    assert result.exit_code == 0
    ids = result.stdout.split()
    assert len(ids) == 3 and all(is_ulid(i) for i in ids)
    assert pail.stats().pending == 3


@pytest.mark.parametrize(
    ("payload", "cause"),
    [("{not json", "is not valid JSON"), ("@/nonexistent/job.json", "cannot read payload file")],
)
def test_given_bad_payload_when_enqueue_then_exit_2_with_one_line_and_nothing_enqueued(
    invoke: Invoke, pail: Pail, bucket: str, payload: str, cause: str
) -> None:
    result = invoke("enqueue", bucket, payload)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert cause in result.stderr
    assert pail.stats().pending == 0


def test_given_pending_job_when_status_then_human_and_json_show_pending(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    human = invoke("status", bucket, job_id)
    as_json = invoke("status", bucket, job_id, "--json")

    assert human.exit_code == as_json.exit_code == 0
    assert "state     pending" in human.stdout
    assert "attempts  0\n" in human.stdout
    data = json.loads(as_json.stdout)
    assert data["id"] == job_id and data["state"] == "pending" and data["attempts"] == 0


def test_given_dead_lettered_job_when_status_then_shows_failed_with_error_and_traceback(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    strict = connect(max_retries=0)
    job_id = strict.enqueue({"n": 7})
    strict.work_once(explode)

    result = invoke("status", bucket, job_id, "--traceback")

    assert result.exit_code == 0
    assert "state     failed" in result.stdout
    assert "RuntimeError: exploded on {'n': 7}" in result.stdout
    assert "Traceback (most recent call last)" in result.stdout
    assert f"pail dlq redrive {bucket} {job_id}" in result.stderr


def test_given_unknown_id_when_status_then_exit_3_with_one_line(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("status", bucket, "01JD8X3W5K9T2B7Q4R6M0N1P2S")

    assert result.exit_code == 3
    assert result.stderr.startswith("error: no job 01JD8X3W5K9T2B7Q4R6M0N1P2S")
    assert "Traceback" not in result.output


def test_given_pail_bucket_env_when_bucket_left_out_then_it_is_used(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke("status", job_id, "--json", env={"PAIL_BUCKET": bucket})

    assert result.exit_code == 0
    assert json.loads(result.stdout)["state"] == "pending"


def test_given_no_bucket_anywhere_when_status_then_usage_error(invoke: Invoke) -> None:
    result = invoke("status", "01JD8X3W5K9T2B7Q4R6M0N1P2S")

    assert result.exit_code == 2
    assert "missing BUCKET" in result.stderr


def test_given_done_job_when_result_then_prints_the_handler_return_value(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 21})
    pail.work_once(double)

    human = invoke("result", bucket, job_id)
    as_json = invoke("--json", "result", bucket, job_id)

    assert human.exit_code == as_json.exit_code == 0
    assert json.loads(human.stdout) == json.loads(as_json.stdout) == {"n": 42}


def test_given_pending_job_when_result_then_exit_4_not_ready(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke("result", bucket, job_id)

    assert result.exit_code == 4
    assert result.stdout == ""
    assert f"job {job_id} is pending" in result.stderr


def test_given_pending_job_when_result_wait_times_out_then_exit_4(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke(
        "result", bucket, job_id, "--wait", "--timeout", "0.3", "--poll-interval", "0.1"
    )

    assert result.exit_code == 4
    assert "timed out after 0.3 s" in result.stderr


def test_given_dead_lettered_job_when_result_then_exit_5_with_the_error(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    strict = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(explode)

    result = invoke("result", bucket, job_id, "--wait")

    assert result.exit_code == 5
    assert "dead-lettered: RuntimeError: exploded" in result.stderr


def test_given_timeout_without_wait_when_result_then_usage_error(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("result", bucket, "01JD8X3W5K9T2B7Q4R6M0N1P2S", "--timeout", "1")

    assert result.exit_code == 2
    assert "--timeout needs --wait" in result.stderr


def test_given_done_job_when_url_then_a_plain_get_of_it_returns_the_result(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 4})
    pail.work_once(double)

    result = invoke("url", bucket, job_id, "--expires", "60")

    assert result.exit_code == 0
    with urllib.request.urlopen(result.stdout.strip(), timeout=10) as response:
        assert json.loads(response.read()) == {"n": 8}


def test_given_pending_job_when_url_status_then_only_the_pending_url_answers(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke("url", bucket, job_id, "--status", "--json")

    assert result.exit_code == 0
    urls = json.loads(result.stdout)["urls"]
    assert set(urls) == {"pending", "running", "done", "failed"}
    with urllib.request.urlopen(urls["pending"], timeout=10) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(urls["done"], timeout=10)
    assert missing.value.code == 404
