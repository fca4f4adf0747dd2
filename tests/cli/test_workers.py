"""``pail work`` and ``pail work-once`` (the runner's entry points) against the local S3 server."""

from __future__ import annotations

import json
from collections.abc import Callable

from pail import JobState, Pail
from tests.support.command import Invoke


def _summary(stdout: str) -> dict[str, object]:
    """The runner's contract: the last line on stdout is the run's summary as JSON."""
    data: dict[str, object] = json.loads(stdout.strip().splitlines()[-1])
    return data


def test_given_pending_job_when_work_once_then_it_is_done_and_summary_says_one(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 5})

    result = invoke("work-once", bucket, "--handler", "tests.cli.handlers:double")

    assert result.exit_code == 0
    assert _summary(result.stdout)["processed"] == 1
    assert pail.result(job_id) == {"n": 10}
    assert pail.work_once(lambda p: p) is False


def test_given_empty_queue_when_work_once_then_exit_0_or_the_chosen_empty_code(
    invoke: Invoke, bucket: str
) -> None:
    default = invoke("work-once", bucket, "--handler", "tests.cli.handlers:double")
    chosen = invoke(
        "work-once", bucket, "--handler", "tests.cli.handlers:double", "--empty-exit-code", "3"
    )

    assert default.exit_code == 0
    assert chosen.exit_code == 3
    assert _summary(chosen.stdout)["stop_reason"] == "empty"


def test_given_failing_handler_when_work_once_then_exit_0_and_failure_recorded_on_job(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    pail = connect(max_retries=0)
    job_id = pail.enqueue({"n": 1})

    result = invoke(
        "work-once", bucket, "--handler", "tests.cli.handlers:explode", "--max-retries", "0"
    )

    assert result.exit_code == 0
    assert _summary(result.stdout)["failed"] == 1
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == "RuntimeError"


def test_given_three_jobs_when_work_max_jobs_2_then_two_are_done_and_it_exits(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    for n in range(3):
        pail.enqueue({"n": n})

    result = invoke("work", bucket, "--handler", "tests.cli.handlers:double", "--max-jobs", "2")

    assert result.exit_code == 0
    assert _summary(result.stdout)["processed"] == 2
    assert (pail.stats().done, pail.stats().pending) == (2, 1)


def test_given_handler_and_bucket_in_env_when_work_once_then_they_are_used(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke(
        "work-once", env={"PAIL_BUCKET": bucket, "PAIL_HANDLER": "tests.cli.handlers:double"}
    )

    assert result.exit_code == 0
    assert pail.result(job_id) == {"n": 2}


def test_given_bad_handlers_when_work_once_then_exit_2_config_with_one_line(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})
    missing = invoke("work-once", bucket, "--handler", "tests.cli.nowhere:run")
    not_callable = invoke("work-once", bucket, "--handler", "tests.cli.handlers:NOT_CALLABLE")
    no_handler = invoke("work-once", bucket)

    for result in (missing, not_callable, no_handler):
        assert result.exit_code == 2
        assert result.stderr.startswith("error: ")
        assert "Traceback" not in result.output
    assert "no module named" in missing.stderr
    assert "not a function" in not_callable.stderr
    assert "no handler" in no_handler.stderr
    assert pail.stats().pending == 1


def test_given_missing_bucket_when_work_once_then_exit_2_config_as_the_runner_says(
    invoke: Invoke,
) -> None:
    result = invoke("work-once", "no-such-bucket-here", "--handler", "tests.cli.handlers:double")

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_given_an_async_handler_reading_current_job_when_work_once_and_work_then_both_succeed(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    first, second = pail.enqueue({"n": 1}), pail.enqueue({"n": 2})
    handler = ("--handler", "tests.support.handlers:whoami")

    once = invoke("work-once", bucket, *handler)
    served = invoke("work", bucket, *handler, "--max-jobs", "1", "--poll-interval", "0.1")

    assert (once.exit_code, served.exit_code) == (0, 0)
    assert _summary(once.stdout)["succeeded"] == _summary(served.stdout)["succeeded"] == 1
    assert pail.result(first) == {"n": 1, "job": first, "attempt": 1}
    assert pail.result(second) == {"n": 2, "job": second, "attempt": 1}
