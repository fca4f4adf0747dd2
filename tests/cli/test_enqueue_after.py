"""``pail enqueue --after ID`` and ``pail jobs --state waiting`` on the real local S3 server."""

from __future__ import annotations

import json

import pytest

from pail import JobState, Pail
from tests.support.command import Invoke
from tests.support.waiting import wait_until

pytestmark = pytest.mark.s3


def test_given_a_job_when_another_is_enqueued_after_it_then_it_waits_and_runs_once_it_succeeded(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    first = invoke("enqueue", bucket, '{"step": "export"}').stdout.strip()

    made = invoke("enqueue", bucket, '{"step": "merge"}', "--after", first)
    merge = made.stdout.strip()
    waiting = invoke("jobs", bucket, "--state", "waiting")
    listed = json.loads(invoke("--json", "jobs", bucket, "--state", "waiting").stdout)

    assert made.exit_code == 0, made.stderr
    assert pail.status(merge).state is JobState.WAITING  # type: ignore[union-attr]
    row = next(line for line in waiting.stdout.splitlines() if merge in line)
    assert "waits for 1 of 1 dependencies" in row
    assert [job["id"] for job in listed["jobs"]] == [merge]
    assert listed["jobs"][0]["detail"]["waits_for"] == 1

    assert pail.work_once(lambda payload: {"done": payload["step"]})

    def promoted() -> bool:
        # An edge to a job that existed before: a reaper's pass promotes (not while the
        # finished job's lease is still listed: its removal goes in the background).
        pail.reap()
        status = pail.status(merge)
        return status is not None and status.state is JobState.PENDING

    wait_until(promoted, what="the reaper's pass to promote the job enqueued --after")
    seen: list[object] = []

    def merge_step(payload: object) -> dict[str, bool]:
        seen.append(payload)
        return {"merged": True}

    while pail.work_once(merge_step):
        pass

    assert seen == [{"step": "merge"}]
    assert pail.result(merge) == {"merged": True}
    assert invoke("jobs", bucket, "--state", "waiting").stdout.startswith("no waiting jobs")


def test_given_after_with_a_key_when_enqueued_twice_then_one_waiting_job_and_the_repeat_says_so(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    first = pail.enqueue({"n": 1})

    made = invoke("enqueue", bucket, '{"n": 2}', "--after", first, "--key", "merge")
    again = invoke("--json", "enqueue", bucket, '{"n": 3}', "--after", first, "--key", "merge")

    assert made.exit_code == 0 and again.exit_code == 0, (made.stderr, again.stderr)
    job_id = made.stdout.strip()
    assert json.loads(again.stdout) == {"id": job_id, "created": False}
    assert pail.status(job_id).state is JobState.WAITING  # type: ignore[union-attr]
    assert pail.stats().waiting == 1


@pytest.mark.parametrize("extra", [["--delay", "5"], ["--priority", "high"]], ids=str)
def test_given_after_with_a_delay_or_priority_then_usage_error_and_nothing_written(
    invoke: Invoke, pail: Pail, bucket: str, extra: list[str]
) -> None:
    first = pail.enqueue({"n": 1})

    result = invoke("enqueue", bucket, '{"n": 2}', "--after", first, *extra)

    assert result.exit_code == 2 and "--after goes with no" in result.stderr
    assert pail.stats().waiting == 0


def test_given_after_an_invalid_id_then_usage_error(invoke: Invoke, bucket: str) -> None:
    result = invoke("enqueue", bucket, '{"n": 2}', "--after", "../not-an-id")

    assert result.exit_code == 2, (result.exit_code, result.stderr)


@pytest.mark.parametrize("body", [b"", b"{not json", b'{"payload": 1}', b"[" * 5000])
def test_given_foreign_bytes_under_wait_when_listed_then_a_row_says_unreadable(
    invoke: Invoke, pail: Pail, bucket: str, body: bytes
) -> None:
    pail.store.put(pail.keys.wait("01J0000000000000000000000A"), body)
    pail.store.put(pail.keys.prefix("wait/") + "photos/cat.jpg", b"\xff\xd8")

    result = invoke("jobs", bucket, "--state", "waiting")

    assert result.exit_code == 0, result.stderr
    rows = result.stdout.splitlines()
    assert any("01J0000000000000000000000A" in r and "unreadable" in r for r in rows)
    assert any("cat.jpg" in r and "foreign" in r for r in rows)
