"""docs/deploy.md and the README's Install section run as written.

The deploy rehearsal (``test_rehearsal.py``) runs every block of
``docs/deploy.md`` (the files it writes and the commands it runs) and the
README's Install block, in a fresh environment. These tests are the fast
half: every block is one the rehearsal runs, the versions they name are this
repository's, and the app synthesises in this process (cdk-nag included).
"""

from __future__ import annotations

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
