"""The README runs as written.

Every ``python`` block of README.md runs, in order and in one namespace (as a
reader would paste them into one session), against the local S3 server: the
bucket name ``my-bucket`` becomes this test's bucket, and the AWS SDK's own
``AWS_ENDPOINT_URL_S3`` points it at the server, so the blocks need no edit.
The one exception, the CDK stack, must be the block ``docs/deploy.md`` holds,
which the infrastructure tests synthesise. Shell blocks are checked for what
can be checked without running them: every ``pail`` command they show exists,
and the exit-code table is the CLI's.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pail.cli import cli
from pail.cli.exit_codes import ExitCode
from pail.local import LocalS3

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEPLOY = ROOT / "docs" / "deploy.md"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_CDK_MARK = "from aws_cdk import"


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(path.read_text()) if lang == language]


def test_given_readme_when_reading_its_blocks_then_each_has_a_known_language() -> None:
    languages = {lang for lang, _ in _BLOCK.findall(README.read_text())}

    assert languages <= {"python", "bash", "text"}, languages


def test_given_readme_python_blocks_when_run_in_order_then_the_tour_does_what_it_says(
    s3_server: LocalS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint_url)
    tour = [b for b in blocks(README, "python") if _CDK_MARK not in b]
    assert len(tour) >= 7
    namespace: dict[str, Any] = {"__name__": "readme"}
    printed = io.StringIO()

    with contextlib.redirect_stdout(printed):
        for body in tour:
            exec(compile(body.replace('"my-bucket"', repr(bucket)), "README.md", "exec"), namespace)

    pail = namespace["pail"]
    job_id = namespace["job_id"]
    result = pail.result(job_id)
    assert set(result) == {"price"}
    assert isinstance(namespace["link"], str) and job_id in namespace["link"]
    assert printed.getvalue().splitlines() == [
        "done 1",
        "1",
        "4 ValueError: source ledger_v1 was retired",
    ]
    assert pail.stats().failed == 0 and pail.stats().pending == 1  # redriven


def test_given_readme_cdk_block_when_compared_then_it_is_the_tested_one_in_deploy_md() -> None:
    readme_cdk = [b for b in blocks(README, "python") if _CDK_MARK in b]
    deploy_cdk = [b for b in blocks(DEPLOY, "python") if _CDK_MARK in b]

    assert len(readme_cdk) == 1
    assert readme_cdk[0] in deploy_cdk


def _pail_commands() -> list[list[str]]:
    commands = []
    for body in blocks(README, "bash"):
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["pail"]:
                commands.append(words[1:])
    return commands


def test_given_readme_shell_blocks_when_parsed_then_every_pail_command_exists() -> None:
    commands = _pail_commands()
    assert len(commands) >= 10
    runner = CliRunner()

    for words in commands:
        path = [w for w in words[:2] if not w.startswith("-")]
        group = path[:2] if path[:1] in (["dlq"], ["schedule"]) else path[:1]  # command groups
        result = runner.invoke(cli, [*group, "--help"])
        assert result.exit_code == 0, f"pail {' '.join(group)}: {result.output}"
        for option in (w.split("=")[0] for w in words if w.startswith("--")):
            assert option in result.output, f"pail {' '.join(group)} has no {option}"


def test_given_readme_exit_code_table_when_compared_then_it_is_the_cli_s() -> None:
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", README.read_text(), re.MULTILINE)

    assert [int(code) for code, _ in rows] == [int(code) for code in ExitCode]
