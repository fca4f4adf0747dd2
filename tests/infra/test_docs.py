"""The minimal stack in docs/deploy.md synthesises as written."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template

from .conftest import ROOT

_TESTED_BLOCK = re.compile(r"<!-- tested: [^>]*-->\s*```python\n(.*?)```", re.DOTALL)


def test_given_deploy_doc_when_its_minimal_stack_runs_then_it_synthesises_a_queue_and_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (code,) = _TESTED_BLOCK.findall((ROOT / "docs" / "deploy.md").read_text())
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/deploy.md", "exec"), namespace)

    stack = namespace["stack"]
    assert isinstance(stack, Stack)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 1)
    template.resource_count_is("AWS::Lambda::Function", 2)  # the reaper and the worker
    template.has_resource_properties("AWS::Lambda::Function", {"Handler": "report.handler"})
    template.has_resource_properties(
        "AWS::Events::Rule",
        {"EventPattern": Match.object_like({"detail-type": ["Object Created"]})},
    )
