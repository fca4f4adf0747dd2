"""``pail dlq list|show|redrive`` against the real local S3 server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pail import JobState, Pail
from tests.cli.handlers import explode
from tests.support.command import Invoke


@pytest.fixture
def dead(connect: Callable[..., Pail]) -> list[str]:
    """Two dead-lettered jobs (no retries: their first failure is final)."""
    strict = connect(max_retries=0)
    ids = [strict.enqueue({"n": n}) for n in (1, 2)]
    while strict.work_once(explode):
        pass
    return ids


def test_given_empty_dlq_when_list_then_says_so_and_json_is_empty(
    invoke: Invoke, bucket: str
) -> None:
    human = invoke("dlq", "list", bucket)
    as_json = invoke("dlq", "list", bucket, "--json")

    assert human.exit_code == as_json.exit_code == 0
    assert "the dead-letter queue is empty" in human.stderr
    assert human.stdout == ""
    assert json.loads(as_json.stdout) == []


def test_given_dead_letters_when_list_then_each_id_shows_with_its_error(
    invoke: Invoke, bucket: str, dead: list[str]
) -> None:
    human = invoke("dlq", "list", bucket)
    as_json = invoke("dlq", "list", bucket, "--json")

    assert human.exit_code == as_json.exit_code == 0
    for job_id in dead:
        assert job_id in human.stdout
    assert "RuntimeError: exploded on" in human.stdout
    letters = json.loads(as_json.stdout)
    assert sorted(letter["id"] for letter in letters) == sorted(dead)
    assert all(letter["error"]["type"] == "RuntimeError" for letter in letters)
    assert all(letter["attempts"] == 1 for letter in letters)


def test_given_limit_when_list_then_at_most_that_many(
    invoke: Invoke, bucket: str, dead: list[str]
) -> None:
    result = invoke("dlq", "list", bucket, "--limit", "1", "--json")

    assert len(json.loads(result.stdout)) == 1


def test_given_dead_letter_when_show_then_payload_error_and_traceback(
    invoke: Invoke, bucket: str, dead: list[str]
) -> None:
    human = invoke("dlq", "show", bucket, dead[0])
    as_json = invoke("dlq", "show", bucket, dead[0], "--json")

    assert human.exit_code == as_json.exit_code == 0
    assert '{"n": 1}' in human.stdout
    assert "Traceback (most recent call last)" in human.stdout
    assert f"pail dlq redrive {bucket} {dead[0]}" in human.stderr
    assert json.loads(as_json.stdout)["payload"] == {"n": 1}


def test_given_unknown_id_when_show_then_exit_3(invoke: Invoke, bucket: str) -> None:
    result = invoke("dlq", "show", bucket, "01JD8X3W5K9T2B7Q4R6M0N1P2S")

    assert result.exit_code == 3
    assert result.stderr.startswith("error: no dead-lettered job")


def test_given_dead_letter_when_redrive_id_then_it_is_pending_again_with_fresh_attempts(
    invoke: Invoke, pail: Pail, bucket: str, dead: list[str]
) -> None:
    result = invoke("dlq", "redrive", bucket, dead[0], "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"redriven": [dead[0]]}
    status = pail.status(dead[0])
    assert status is not None and status.state is JobState.PENDING and status.attempts == 0
    assert [letter.job_id for letter in pail.dead_letters()] == [dead[1]]


def test_given_dead_letters_when_redrive_all_then_every_one_is_pending(
    invoke: Invoke, pail: Pail, bucket: str, dead: list[str]
) -> None:
    result = invoke("dlq", "redrive", bucket, "--all")

    assert result.exit_code == 0
    assert sorted(result.stdout.split()) == sorted(dead)
    assert "redrove 2 job(s)" in result.stderr
    assert pail.stats().pending == 2 and pail.dead_letters() == []


def test_given_empty_dlq_when_redrive_all_then_nothing_to_do(invoke: Invoke, bucket: str) -> None:
    result = invoke("dlq", "redrive", bucket, "--all")

    assert result.exit_code == 0
    assert "nothing to redrive" in result.stderr


def test_given_unknown_id_when_redrive_then_exit_3_and_nothing_written(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    result = invoke("dlq", "redrive", bucket, "01JD8X3W5K9T2B7Q4R6M0N1P2S")

    assert result.exit_code == 3
    assert pail.stats().pending == 0


@pytest.mark.parametrize(
    "args", [["redrive"], ["redrive", "jobs", "01JD8X3W5K9T2B7Q4R6M0N1P2S", "--all"]]
)
def test_given_neither_or_both_of_id_and_all_when_redrive_then_usage_error(
    invoke: Invoke, args: list[str]
) -> None:
    result = invoke("dlq", *args, env={"PAIL_BUCKET": "jobs"})

    assert result.exit_code == 2
