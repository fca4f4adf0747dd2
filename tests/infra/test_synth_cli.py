"""scripts/synth: the real CDK CLI synthesises the example app offline, and cfn-lint passes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT


@pytest.mark.synth
def test_given_no_aws_account_when_scripts_synth_runs_then_templates_are_written_and_linted(
    tmp_path: Path,
) -> None:
    # No JSII_* either (tests/infra/conftest.py sets them): scripts/synth must silence
    # jsii's Node banner itself.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_", "JSII_"))}
    env |= {
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [str(ROOT / "scripts" / "synth"), "-o", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (out / "PailExample.template.json").is_file()
    assert "synth ok" in result.stderr
    output = result.stdout + result.stderr
    assert "end-of-life" not in output and "!!" not in output, output[-3000:]
