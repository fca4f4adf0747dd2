"""The CLI's rough edges that a new user met (issue 14), each through the ``pail`` command.

In-process tests use click's runner (stdout and stderr are pipes, as in a
script); the ones that need a signal or a server that stays up run the
console script as a process. All talk to the real local S3 server.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import socket
import urllib.request
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import click
import pytest
from rich.console import Console

from pail import CredentialsNotFoundError, Pail
from pail.cli.app import ShortUsageError
from pail.cli.worker_log import IdleReporter
from pail.drain import JobReport, Outcome
from pail.errors import ConfigurationError
from pail.local import LocalS3
from pail.output import Column, Output
from tests.support.command import Invoke, LineReader, Spawn, pail_script, process_env

ID = "01JD8X3W5K9T2B7Q4R6M0N1P2S"


@pytest.fixture
def env(s3_server: LocalS3) -> dict[str, str]:
    return process_env(s3_server.env())


def rows(stdout: str) -> dict[str, str]:
    """``label  value`` lines (a status off a terminal) as a dict."""
    pairs = (re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in stdout.splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


# -- 1. a malformed endpoint is a configuration error (exit 2), named where it came from


def test_given_endpoint_option_not_a_url_when_any_command_then_exit_2_naming_the_option(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("stats", bucket, "--endpoint-url", "not-a-url")

    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: --endpoint-url must be an http:// or https:// URL")
    assert "'not-a-url'" in result.stderr and "unexpected" not in result.stderr


def test_given_endpoint_variable_not_a_url_when_any_command_then_exit_2_naming_the_variable(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("status", bucket, ID, env={"PAIL_ENDPOINT_URL": "ftp://127.0.0.1"})

    assert result.exit_code == 2
    assert result.stderr.startswith("error: PAIL_ENDPOINT_URL must be an http:// or https:// URL")


def test_given_endpoint_not_a_url_when_connect_from_python_then_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="endpoint_url must be an http"):
        Pail.connect("jobs", endpoint_url="not-a-url")


# -- 2. a missing argument is named, not taken for a missing bucket


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        (["enqueue"], "missing PAYLOAD after BUCKET"),
        (["result"], "missing ID after BUCKET"),
        (["status"], "missing ID after BUCKET"),
        (["dlq", "redrive"], "missing ID after BUCKET"),
    ],
)
def test_given_bucket_but_no_payload_or_id_when_run_then_the_missing_argument_is_named(
    invoke: Invoke, bucket: str, command: list[str], missing: str
) -> None:
    result = invoke(*command, bucket)

    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {missing} '{bucket}'")
    assert "missing BUCKET" not in result.stderr


def test_given_id_but_no_bucket_anywhere_when_result_then_the_bucket_is_named_missing(
    invoke: Invoke,
) -> None:
    no_bucket = invoke("result", ID)
    nothing = invoke("dlq", "redrive")
    from_env = invoke("enqueue", env={"PAIL_BUCKET": "jobs"})

    assert no_bucket.stderr.startswith("error: missing BUCKET (BUCKET may come from PAIL_BUCKET)")
    assert nothing.stderr.startswith("error: missing BUCKET and ID (")
    assert "or give --all" in nothing.stderr
    assert from_env.stderr.startswith("error: missing PAYLOAD (usage: ")
    assert {no_bucket.exit_code, nothing.exit_code, from_env.exit_code} == {2}


# -- 3. waiting for the result of a job that will never have one


def test_given_cancelled_job_when_result_wait_then_exit_6_at_once(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})
    pail.cancel(job_id)

    waited = invoke("result", bucket, job_id, "--wait", "--timeout", "60")
    asked = invoke("result", bucket, job_id)

    assert waited.exit_code == asked.exit_code == 6
    assert waited.stderr == f"error: job {job_id} was cancelled; it will never have a result\n"


def test_given_result_wait_when_the_job_is_cancelled_meanwhile_then_it_stops_waiting_with_6(
    env: dict[str, str], pail: Pail, bucket: str, spawn: Spawn
) -> None:
    job_id = pail.enqueue({"n": 1})
    process = spawn([pail_script(), "result", bucket, job_id, "--wait", "--timeout", "60"], env)
    stderr = LineReader(process.stderr)  # type: ignore[arg-type]

    stderr.wait_for(f"waiting for job {job_id}")
    assert pail.cancel(job_id) is True
    process.wait(timeout=60)  # the reader thread owns stderr: no communicate()

    assert process.returncode == 6
    assert "was cancelled; it will never have a result" in stderr.rest()


def test_given_dead_lettered_job_when_result_wait_then_exit_5_saying_it_never_will(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    strict = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(lambda payload: 1 / 0)

    result = invoke("result", bucket, job_id, "--wait", "--timeout", "60")

    assert result.exit_code == 5
    assert "dead-lettered" in result.stderr and "will never have a result" in result.stderr


# -- 5. status shows the attempts the job records, whatever the reader's --max-retries


def test_given_job_retried_once_when_status_with_any_max_retries_then_attempts_is_the_jobs_count(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})
    pail.work_once(lambda payload: 1 / 0)  # attempt 1 fails; the job is pending again

    default = invoke("status", bucket, job_id)
    nine = invoke("status", bucket, job_id, "--max-retries", "9")

    assert rows(default.stdout)["attempts"] == rows(nine.stdout)["attempts"] == "1"
    assert " of " not in default.stdout + nine.stdout
    assert json.loads(invoke("--json", "status", bucket, job_id).stdout)["attempts"] == 1


# -- 6. stats: a delayed column, and the oldest pending over high-priority entries


def test_given_high_priority_and_delayed_jobs_when_stats_then_delayed_column_and_oldest_pending(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1}, priority="high")  # the only job waiting now
    pail.enqueue({"n": 2}, delay=3600)  # pending, but not due: not waiting yet

    table = invoke("stats", bucket)
    as_json = json.loads(invoke("--json", "stats", bucket).stdout)
    watched = invoke("stats", bucket, "--watch", "--count", "1")

    header, row = table.stdout.splitlines()
    counts = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    # One definition (pail.stats.STATES): a delayed job is not pending, as pail queues counts it.
    assert (counts["pending"], counts["delayed"], counts["running"]) == ("1", "1", "0")
    assert counts["oldest_pending"] != "-"  # the high-priority job is waiting
    assert (as_json["pending"], as_json["delayed"]) == (1, 1)
    assert as_json["oldest_pending_age"] is not None
    assert "pending=1 " in watched.stdout and "delayed=1 " in watched.stdout


# -- 7. off a terminal: plain tables, one-line errors, short usage errors


def test_given_a_pipe_when_stats_then_a_tab_separated_header_and_row_and_no_box(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue_many([{"n": 1}, {"n": 2}])

    result = invoke("stats", bucket)

    header, row = result.stdout.splitlines()
    counts = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert counts["pending"] == "2" and counts["running"] == "0"
    assert "oldest_pending" in counts
    assert not set("┏┃━│└") & set(result.stdout)
    assert f"s3://{bucket}/" in result.stderr  # the title, off stdout


def test_given_a_terminal_when_a_table_then_it_is_still_drawn_with_a_box_and_title() -> None:
    out = Output()
    drawn = io.StringIO()
    out.console = Console(file=drawn, force_terminal=True, width=100)

    out.table([Column("pending", justify="right")], [["2"]], title="s3://jobs/")

    assert "┏" in drawn.getvalue() and "s3://jobs/" in drawn.getvalue()


def test_given_a_pipe_when_usage_error_then_one_line_with_the_cause_and_the_usage(
    invoke: Invoke, bucket: str
) -> None:
    unknown_option = invoke("stats", bucket, "--bogus")
    unknown_command = invoke("stats-please", bucket)

    assert unknown_option.exit_code == unknown_command.exit_code == 2
    assert unknown_option.stderr.count("\n") == 1
    assert unknown_option.stderr.startswith("error: No such option '--bogus'. (usage: ")
    assert unknown_option.stderr.endswith(" stats [OPTIONS] [BUCKET])\n")  # click's runner: "cli"
    assert unknown_command.stderr.count("\n") == 1
    assert unknown_command.stderr.startswith("error: No such command 'stats-please'.")


def test_given_a_terminal_when_usage_error_then_two_lines_the_cause_first() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    command = click.Command("stats", params=[click.Argument(["bucket"], required=False)])
    ctx = click.Context(command, info_name="stats")
    shown = Terminal()

    ShortUsageError("missing ID", ctx).show(shown)

    lines = click.unstyle(shown.getvalue()).splitlines()
    assert lines == [
        "error: missing ID",
        "usage: stats [OPTIONS] [BUCKET]   (stats --help for more)",
    ]


def test_given_storage_unreachable_when_stats_then_one_error_line_with_the_debug_hint(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("stats", bucket, "--endpoint-url", "http://127.0.0.1:9")

    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: ")
    assert result.stderr.rstrip().endswith("(--debug shows the traceback)")


# -- 8. Ctrl-C ends a watch with 130


@pytest.mark.parametrize(
    ("args", "first_line"),
    [(["stats", "--watch", "--interval", "0.2"], "pending="), (["reap", "--every", "0.2"], "")],
)
def test_given_a_watch_when_ctrl_c_then_exit_130(
    env: dict[str, str], bucket: str, args: list[str], first_line: str, spawn: Spawn
) -> None:
    process = spawn([pail_script(), args[0], bucket, *args[1:]], env)
    stdout = LineReader(process.stdout)  # type: ignore[arg-type]

    stdout.wait_for(first_line or "leases scanned")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "interrupted"


# -- 9. pail work says what it serves, that it idles, and logs as asked


def test_given_work_when_started_then_a_start_line_idle_lines_and_no_botocore_line(
    env: dict[str, str], pail: Pail, bucket: str, spawn: Spawn
) -> None:
    job_id = pail.enqueue({"n": 4})
    process = spawn(
        [
            pail_script(),
            "work",
            bucket,
            "--handler",
            "tests.cli.handlers:double",
            "--idle-every",
            "0.2",
        ],
        env,  # credentials in the environment: botocore would say "Found credentials"
    )
    stderr = LineReader(process.stderr)  # type: ignore[arg-type]

    start_line = stderr.wait_for("pail work: ")
    stderr.wait_for(f"job {job_id} attempt 1 succeeded")
    stderr.wait_for("idle for ")
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)  # the reader thread owns stderr: no communicate()
    everything = stderr.rest()
    assert process.stdout is not None
    stdout = process.stdout.read()

    assert process.returncode == 0
    assert stderr.lines[0] == start_line  # the very first line
    assert f"bucket {bucket}, queue (default), handler tests.cli.handlers:double" in start_line
    assert "Found credentials" not in everything and "botocore" not in everything
    assert json.loads(stdout.splitlines()[-1])["processed"] == 1


def test_given_log_format_json_when_work_once_then_every_stderr_line_is_a_json_record(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})

    result = invoke(
        "work-once", bucket, "--handler", "tests.cli.handlers:double", "--log-format", "json"
    )

    assert result.exit_code == 0
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert records[0]["logger"] == "pail.work" and records[0]["bucket"] == bucket
    assert records[0]["handler"] == "tests.cli.handlers:double"
    job_lines = [r for r in records if r.get("job_id") == job_id]
    assert [r["attempt"] for r in job_lines] == [1, 1]
    assert "started" in job_lines[0]["message"] and "succeeded" in job_lines[1]["message"]
    assert {r["level"] for r in records} == {"INFO"}


def test_given_log_level_warning_when_work_once_then_no_info_lines(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})

    result = invoke(
        "work-once", bucket, "--handler", "tests.cli.handlers:double", "--log-level", "warning"
    )

    assert result.exit_code == 0
    assert result.stderr == ""
    assert pail.stats().done == 1


def test_given_idle_reporter_when_checked_then_it_logs_only_with_no_job_started_or_running(
    caplog: pytest.LogCaptureFixture, pail: Pail
) -> None:
    now = [100.0]
    reporter = IdleReporter(every=60, poll_interval=20, clock=lambda: now[0])
    pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None
    caplog.set_level(logging.INFO, logger="pail")

    now[0] += 61
    seen = reporter.check(0)  # nothing happened yet: idle
    reporter.claimed(message)
    seen_while_running = reporter.check(seen)  # a job started: not idle
    now[0] += 61
    reporter.check(seen_while_running)  # still running: not idle
    reporter.settled(JobReport(message.id, 1, Outcome.SUCCEEDED, 0.1))
    message.complete(None)
    now[0] += 90
    reporter.check(seen_while_running)  # ended 90 s ago, nothing since: idle

    idle = [r.getMessage() for r in caplog.records if r.getMessage().startswith("idle")]
    assert idle == [
        "idle for 1m 1s: no job to run; polling every 20 s at most",
        "idle for 1m 30s: no job to run; polling every 20 s at most",
    ]


# -- 10. no credentials: the hint names the command's options, not Python's


@pytest.fixture
def no_credentials() -> Iterator[dict[str, str | None]]:
    unset: dict[str, str | None] = {
        name: None
        for name in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_SECURITY_TOKEN",
            "AWS_PROFILE",
            "AWS_DEFAULT_PROFILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
        )
    }
    yield {
        **unset,
        "AWS_CONFIG_FILE": "/nonexistent/pail-test/config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/pail-test/credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@pytest.mark.parametrize(
    "command",
    [["stats"], ["work-once", "--handler", "tests.cli.handlers:double"]],
)
def test_given_no_credentials_when_a_command_runs_then_exit_2_with_a_hint_in_cli_terms(
    invoke: Invoke, bucket: str, no_credentials: dict[str, str], command: list[str]
) -> None:
    result = invoke(command[0], bucket, *command[1:], env=no_credentials)

    assert result.exit_code == 2
    error = result.stderr.splitlines()[-1]
    assert error.startswith("error: ") and "no AWS credentials found" in error
    assert "--profile NAME" in error and "AWS_ACCESS_KEY_ID" in error
    assert "access_key_id=" not in error
    assert "access_key_id=" in CredentialsNotFoundError("x").args[0]  # Python keeps its own


# -- 11. status of a running job: who holds it, and when it last renewed


def test_given_running_job_when_status_then_holder_and_last_renewal_are_shown(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None
    try:
        human = invoke("status", bucket, job_id)
        as_json = json.loads(invoke("--json", "status", bucket, job_id).stdout)
    finally:
        message.complete(None)

    shown = rows(human.stdout)
    assert shown["state"] == "running"
    holder = f"{socket.gethostname()}:{os.getpid()}"  # pail's owner: this process
    assert shown["holder"] == as_json["holder"] == holder
    assert shown["last renewal"].endswith(" ago)")
    assert "updated" not in shown


# -- 12. the status page of any job: `pail url ID --page`


def test_given_url_page_when_run_then_it_serves_the_jobs_status_page_until_ctrl_c(
    env: dict[str, str], pail: Pail, bucket: str, spawn: Spawn
) -> None:
    job_id = pail.enqueue({"n": 1})
    process = spawn([pail_script(), "url", bucket, job_id, "--page"], env)
    link = LineReader(process.stdout).wait_for("http://127.0.0.1:")  # type: ignore[arg-type]

    with urllib.request.urlopen(link.strip(), timeout=30) as page:
        html = page.read().decode()
    params = {k: v[0] for k, v in parse_qs(urlsplit(link.strip()).fragment).items()}
    with urllib.request.urlopen(params["pending"], timeout=30) as pending:
        pending_body = json.loads(pending.read())
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)

    assert "<html" in html.lower()
    assert params["id"] == job_id
    assert pending_body["payload"] == {"n": 1}
    assert process.returncode == 130


def test_given_unknown_id_when_url_page_then_exit_3_and_nothing_served(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("url", bucket, ID, "--page")

    assert result.exit_code == 3
    assert result.stdout == ""


def test_given_open_without_page_when_url_then_usage_error(invoke: Invoke, bucket: str) -> None:
    result = invoke("url", bucket, ID, "--open")

    assert result.exit_code == 2
    assert "--open and --port need --page" in result.stderr
