"""Global options: before or after the command, explicit beats environment, namespaces, profiles."""

from __future__ import annotations

import json
from collections.abc import Callable

from pail import Pail
from pail.local import LocalS3
from tests.support.command import Invoke


def test_given_json_before_or_after_the_command_when_stats_then_both_print_json(
    invoke: Invoke, bucket: str
) -> None:
    before = invoke("--json", "stats", bucket)
    after = invoke("stats", bucket, "--json")

    assert json.loads(before.stdout) == json.loads(after.stdout)


def test_given_queue_option_when_enqueue_then_the_job_lives_under_that_namespace(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    result = invoke("enqueue", bucket, '{"n": 1}', "--queue", "reports")

    job_id = result.stdout.strip()
    reports, default = connect(queue="reports"), connect()
    assert reports.store.head(f"reports/queue/{job_id}") is not None
    assert (reports.stats().pending, default.stats().pending) == (1, 0)
    via_env = invoke("stats", bucket, "--json", env={"PAIL_QUEUE": "reports"})
    assert json.loads(via_env.stdout)["pending"] == 1


def test_given_endpoint_option_when_env_points_elsewhere_then_the_option_wins(
    invoke: Invoke, s3_server: LocalS3, bucket: str
) -> None:
    result = invoke(
        "stats",
        bucket,
        "--endpoint-url",
        s3_server.endpoint_url,
        env={"PAIL_ENDPOINT_URL": "http://127.0.0.1:9"},
    )

    assert result.exit_code == 0, result.stderr


def test_given_unknown_profile_when_any_command_then_exit_2_naming_the_profile(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("stats", bucket, "--profile", "no-such-profile-here")

    assert result.exit_code == 2
    assert "no-such-profile-here" in result.stderr
    assert result.stderr.count("\n") == 1


def test_given_invalid_settings_when_any_command_then_exit_2(invoke: Invoke, bucket: str) -> None:
    bad_name = invoke("stats", "Not_A_Bucket")
    bad_retries = invoke("stats", bucket, "--max-retries", "lots")
    bad_queue = invoke("stats", bucket, "--queue", "Not/Valid")
    bad_id = invoke("status", bucket, "a/b")

    assert [r.exit_code for r in (bad_name, bad_retries, bad_queue, bad_id)] == [2, 2, 2, 2]
    assert "invalid bucket name" in bad_name.stderr
    assert "max_retries" in bad_retries.stderr
    assert "invalid queue namespace" in bad_queue.stderr
    assert "invalid job id" in bad_id.stderr
