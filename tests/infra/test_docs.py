"""docs/deploy.md and the README's Install section run as written.

The deploy rehearsal (``test_rehearsal.py``) runs every block of
``docs/deploy.md`` (the files it writes and the commands it runs) and the
README's Install block, in a fresh environment. These tests are the fast
half: every block is one the rehearsal runs, the versions they name are this
repository's, and the app synthesises in this process (cdk-nag included).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match, Template

from .conftest import ROOT
from .rehearsal import toolchain


def test_given_deploy_doc_when_reading_its_blocks_then_each_is_a_file_or_a_command_the_rehearsal_runs() -> (
    None
):
    found = toolchain.blocks(toolchain.DEPLOY)

    assert found, "docs/deploy.md has no code block"
    for block in found:
        assert block.file is not None or block.language == "bash", block.body[:80]
    assert {b.file for b in found if b.file} >= {"app.py", "handlers/report.py", "pyproject.toml"}


def test_given_docs_when_they_name_versions_then_they_are_this_repository_s() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wheel = f"pailq-{version}-py3-none-any.whl"
    script = toolchain.deploy_script(ROOT / "dist" / wheel, ROOT / "cdk")

    assert f"{ROOT}/dist/{wheel}[cdk]" in script
    assert "npx" not in script
    assert wheel in (ROOT / "README.md").read_text()
    assert toolchain.install_block().split() == ["scripts/wheel"]


def test_given_deploy_doc_app_when_run_in_its_folder_then_it_synthesises_queue_workers_and_no_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolchain.write_user_app(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    # jsii's node process keeps the directory it started in, so the app's relative
    # folder is made absolute here (the rehearsal runs it as written, in its folder).
    code = (tmp_path / "app.py").read_text().replace('"handlers"', repr(str(tmp_path / "handlers")))
    namespace: dict[str, Any] = {"__name__": "__main__"}

    exec(compile(code, "docs/deploy.md:app.py", "exec"), namespace)

    app = namespace["app"]
    assert isinstance(app, App)
    template = Template.from_stack(namespace["stack"])
    template.resource_count_is("AWS::S3::Bucket", 1)
    # The worker, two reapers, and the wake-up of the auto scaling Fargate service.
    template.resource_count_is("AWS::Lambda::Function", 4)
    template.resource_count_is("AWS::ECS::TaskDefinition", 1)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 0, "MaxCapacity": 4}
    )
    template.has_resource_properties("AWS::Lambda::Function", {"Handler": "report.handler"})
    template.has_resource_properties(
        "AWS::Events::Rule",
        {"EventPattern": Match.object_like({"detail-type": ["Object Created"]})},
    )


def test_given_the_cdk_json_files_when_read_then_notices_telemetry_and_version_reporting_are_off() -> (
    None
):
    repository = json.loads((ROOT / "cdk.json").read_text())
    (documented,) = [b.body for b in toolchain.blocks(toolchain.DEPLOY) if b.file == "cdk.json"]

    for settings in (repository, json.loads(documented)):
        assert settings["notices"] is False
        assert settings["versionReporting"] is False
        assert settings["context"]["cli-telemetry"] is False


_JSII_EXPORT = re.compile(r"`export (JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION)=(\d+)`")
_IMPORT_CDK = "import aws_cdk; aws_cdk.App()"


def _jsii_start(extra: dict[str, str]) -> str:
    """What starting aws-cdk-lib's jsii bridge prints, with no JSII_* setting but ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_")} | extra
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_CDK],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout + done.stderr


def test_given_this_machine_s_node_when_the_deploy_doc_s_export_is_set_then_jsii_prints_no_banner() -> (
    None
):
    text = " ".join(toolchain.DEPLOY.read_text().split())
    found = _JSII_EXPORT.search(text)
    assert found, "docs/deploy.md no longer says how to silence jsii's Node banner"
    name, major = found.groups()
    node = subprocess.run(
        ["node", "-p", "process.versions.node.split('.')[0]"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()

    quiet = _jsii_start({name: major})

    assert "end-of-life" not in quiet and "!!" not in quiet, quiet
    if node == major:  # the banner the doc speaks of is there without it, naming the lines to use
        banner = _jsii_start({})
        assert f"Node {major} is end-of-life" in banner
        supported = re.findall(r"- \^(\d+)\.0\.0", banner)
        assert supported, banner
        assert f"**{' or '.join(sorted(supported, key=int))}**" in text
