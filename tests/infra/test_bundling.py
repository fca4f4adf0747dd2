"""The runtime layer: what pip puts in it, and the pail package copied next to it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from pail_cdk.bundling import RuntimeBundle

from .conftest import Synthesis


def test_given_bundle_options_when_keyed_then_platform_and_contents_decide_the_key() -> None:
    arm = RuntimeBundle(architecture="arm64")
    assert arm.key() == RuntimeBundle(architecture="arm64").key()
    assert arm.key() != RuntimeBundle(architecture="x86_64").key()
    assert arm.platform == "manylinux2014_aarch64"
    assert RuntimeBundle(architecture="x86_64").platform == "manylinux2014_x86_64"


def test_given_public_powertools_when_bundled_then_powertools_is_left_out() -> None:
    bundled = RuntimeBundle().requirements
    assert any(req.startswith("aws-lambda-powertools") for req in bundled)
    assert any(req.startswith("boto3") for req in bundled)
    lean = RuntimeBundle(include_powertools=False).requirements
    assert not any(req.startswith("aws-lambda-powertools") for req in lean)


def test_given_cached_dependencies_when_written_then_layer_holds_pail_and_its_metadata(
    example: Synthesis, tmp_path: Path
) -> None:
    # `example` built (and cached) the arm64 dependencies already.
    bundle = RuntimeBundle(architecture="arm64")
    bundle.write(tmp_path)
    site = tmp_path / "python"
    assert (site / "pail" / "__init__.py").is_file()
    assert (site / "pail" / "aws" / "reaper.py").is_file()
    assert not list(site.glob("pail/**/__pycache__"))
    assert (site / "aws_lambda_powertools").is_dir()
    assert (site / "boto3").is_dir()
    (pailq,) = [
        dist
        for dist in importlib.metadata.distributions(path=[str(site)])
        if dist.metadata["Name"] == "pailq"
    ]
    assert pailq.version == bundle.version
