"""A new user's first hour with the ``pail`` command (issue 22): what it said that was not true.

A high-priority job listed as "due 1970-01-01", ``| head`` ending with
"error: unexpected BrokenPipeError", and a handler in ``handlers/report.py``
that ``--handler report:run`` could not find without a word about why.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pail import Pail
from pail.errors import ConfigurationError
from pail.local import LocalS3
from pail.runner import load_handler
from tests.support.command import Invoke, kill_all, pail_script, process_env, start


def test_given_a_high_priority_job_when_jobs_pending_then_it_reads_high_priority_not_1970(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    urgent = pail.enqueue({"n": 1}, priority="high")
    later = pail.enqueue({"n": 2}, delay=3600)

    result = invoke("jobs", bucket, "--state", "pending")
    delayed = invoke("jobs", bucket, "--state", "delayed")

    assert result.exit_code == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if urgent in line)
    assert "1970" not in result.stdout
    assert row.endswith("high priority: first in line")
    assert (
        next(line for line in delayed.stdout.splitlines() if later in line).split("\t")[-1][:4]
        == "due "
    )


def closed_stdout_run(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``pail ARGS`` with nobody reading its stdout (``| head`` after it exited)."""
    process = start([pail_script(), *args], env)
    try:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the only read end: every write now fails with EPIPE
        stderr = process.stderr.read()
        return process.wait(timeout=60), stderr
    finally:
        kill_all([process])


@pytest.mark.parametrize("command", [["dlq", "show"], ["dlq", "list"], ["stats"]])
def test_given_a_closed_pipe_when_a_command_prints_then_it_ends_quietly_with_141(
    s3_server: LocalS3, connect: Callable[..., Pail], bucket: str, command: list[str]
) -> None:
    strict = connect(max_retries=0)
    job_id = strict.enqueue({"n": 1})
    strict.work_once(lambda payload: 1 / 0)
    args = [*command, bucket, job_id] if command[-1] == "show" else [*command, bucket]

    code, stderr = closed_stdout_run(args, process_env(s3_server.env()))

    assert code == 141, stderr
    assert "error" not in stderr.lower() and "Traceback" not in stderr  # the title may be there


def test_given_a_handler_in_a_subfolder_when_not_found_then_the_error_names_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "report_hint_probe.py").write_text("def run(payload):\n    return 1\n")
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigurationError) as raised:
        load_handler("report_hint_probe:run")

    assert "handlers/report_hint_probe.py is here" in str(raised.value)
    assert "PYTHONPATH=handlers" in str(raised.value)


def test_given_a_handler_nowhere_when_not_found_then_no_folder_is_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigurationError) as raised:
        load_handler("report_hint_nowhere:run")

    assert "PYTHONPATH=" not in str(raised.value)


def test_given_output_to_a_pipe_when_read_to_the_end_then_exit_0(
    s3_server: LocalS3, bucket: str
) -> None:
    done = subprocess.run(
        [pail_script(), "stats", bucket],
        env=process_env(s3_server.env()),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
