"""The runtime layer: built from the installed pail, for the Lambda platform, with bytecode.

The dependencies here come from a wheelhouse this test writes (one tiny
wheel), so the build is offline and quick; the real dependencies are built by
the ``example`` synth and by the deploy rehearsal.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import json
import zipfile
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from pail_cdk import bundling, wheels
from pail_cdk.bundling import RuntimeBundle, runtime_layer
from pail_cdk.distribution import InstalledPail
from pail_cdk.errors import LayerBuildError
from pail_cdk.target import Target

from .conftest import Synthesis

FIXTURE_DEP = "pail-fixture-dep"


def make_wheel(folder: Path, name: str = FIXTURE_DEP, version: str = "1.0") -> Path:
    """A pure-Python wheel holding one module, ``pail_fixture_dep``."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}.py": b"VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def fixture_bundle(tmp_path: Path, **options: str | None) -> RuntimeBundle:
    """A bundle of the installed pail whose only requirement is the fixture wheel."""
    pail = dataclasses.replace(InstalledPail.find(), requires=(f"{FIXTURE_DEP}>=1",))
    return RuntimeBundle(
        architecture="x86_64",
        include_powertools=False,
        cache=str(tmp_path / "cache"),
        pail=pail,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture(params=["uv", "pip"])
def installer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each installer the layer builder can use (``pail_cdk.wheels.installer``)."""
    chosen: str = request.param
    monkeypatch.setenv(wheels.ENV_INSTALLER, chosen)
    return chosen


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    make_wheel(folder)
    return folder


def test_given_bundle_options_when_keyed_then_platform_and_contents_decide_the_key() -> None:
    arm = RuntimeBundle(architecture="arm64")
    assert arm.key() == RuntimeBundle(architecture="arm64").key()
    assert arm.key() != RuntimeBundle(architecture="x86_64").key()
    assert arm.platform == "manylinux2014_aarch64"
    assert RuntimeBundle(architecture="x86_64").platform == "manylinux2014_x86_64"


def test_given_installed_pail_when_listing_requirements_then_lambda_extra_in_and_cli_stack_out() -> (
    None
):
    bundled = RuntimeBundle().requirements
    names = {req.split(">")[0].split("=")[0] for req in bundled}
    assert {"boto3", "python-ulid", "aws-lambda-powertools"} <= names
    assert not names & {"click", "rich", "moto", "aws-cdk-lib"}
    lean = RuntimeBundle(include_powertools=False).requirements
    assert not any(req.startswith("aws-lambda-powertools") for req in lean)
    assert RuntimeBundle().version == importlib.metadata.version("pailq")


def test_given_markers_when_evaluated_then_the_lambda_platform_decides_not_this_machine() -> None:
    pail = dataclasses.replace(
        InstalledPail.find(),
        requires=(
            'arm-only; platform_machine == "aarch64"',
            'windows-only; sys_platform == "win32"',
            'old-python; python_version < "3.12"',
            'tracing; extra == "lambda"',
            "always>=2",
        ),
    )
    arm = pail.requirements(Target("arm64"), extras=("lambda",))
    x86 = pail.requirements(Target("x86_64"))
    assert arm == ("always>=2", "arm-only", "tracing")
    assert x86 == ("always>=2",)


def test_given_installed_pail_when_listing_layer_files_then_the_cli_and_local_server_are_left_out() -> (
    None
):
    files = {str(relative) for relative, _ in InstalledPail.find().files()}
    everything = {str(relative) for relative, _ in InstalledPail.find().files(lambda_only=False)}
    assert {"pail/aws/reaper.py", "pail/aws/lambda_worker.py", "pail/queue.py"} <= files
    assert not {f for f in files if f.startswith("pail/cli/")}
    assert "pail/local.py" not in files and "pail/output.py" not in files
    assert {"pail/cli/__init__.py", "pail/local.py"} <= everything


def test_given_wheelhouse_when_written_then_layer_holds_pail_its_metadata_and_hash_based_bytecode(
    tmp_path: Path, wheelhouse: Path, installer: str
) -> None:
    bundle = fixture_bundle(tmp_path, wheelhouse=str(wheelhouse))
    if bundle.bytecode_python is None:
        pytest.skip("no Python 3.12 interpreter here to compile the layer")
    out = tmp_path / "layer"
    bundle.write(out)

    site = out / "python"
    assert (site / "pail_fixture_dep.py").is_file()
    assert (site / "pail" / "aws" / "reaper.py").is_file()
    assert not (site / "pail" / "cli").exists()
    (pailq,) = [
        dist
        for dist in importlib.metadata.distributions(path=[str(site)])
        if dist.metadata["Name"] == "pailq"
    ]
    assert pailq.version == bundle.version
    assert pailq.requires == importlib.metadata.distribution("pailq").requires
    for source in (site / "pail" / "queue.py", site / "pail_fixture_dep.py"):
        (pyc,) = source.parent.glob(f"__pycache__/{source.stem}.cpython-312.pyc")
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{pyc}: not unchecked hash-based (flags {flags:#b})"
    assert not list(site.rglob("*.cpython-313.pyc"))
    assert not (site / ".lock").exists()


def test_given_cached_dependencies_when_index_and_wheelhouse_are_gone_then_the_cache_serves(
    tmp_path: Path, wheelhouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture_bundle(tmp_path, wheelhouse=str(wheelhouse)).dependencies()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")

    offline = fixture_bundle(tmp_path)
    offline.write(tmp_path / "layer")

    assert (tmp_path / "layer" / "python" / "pail_fixture_dep.py").is_file()


@pytest.mark.parametrize("with_wheelhouse", [False, True], ids=["no-index", "empty-wheelhouse"])
def test_given_no_cache_index_or_wheel_when_building_then_one_line_error_names_both_remedies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_wheelhouse: bool, installer: str
) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    bundle = fixture_bundle(tmp_path, wheelhouse=str(empty) if with_wheelhouse else None)

    with pytest.raises(LayerBuildError) as caught:
        bundle.dependencies()

    message = str(caught.value)
    assert "\n" not in message
    assert "Could not find a version" not in message and "unsatisfiable" not in message
    assert FIXTURE_DEP in message
    assert "PAIL_WHEELHOUSE" in message and "package index" in message
    assert str(tmp_path / "cache") in message
    assert not list((tmp_path / "cache" / "layers").glob("deps-*"))


def test_given_no_matching_python_when_synthesised_then_layer_warns_and_ships_sources(
    tmp_path: Path, wheelhouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(bundling._pythons, "3.12", None)
    monkeypatch.setenv("PAIL_WHEELHOUSE", str(wheelhouse))
    monkeypatch.setenv("PAIL_CDK_CACHE", str(tmp_path / "cache"))
    fixture_pail = dataclasses.replace(InstalledPail.find(), requires=(f"{FIXTURE_DEP}>=1",))
    monkeypatch.setattr(InstalledPail, "find", classmethod(lambda cls: fixture_pail))
    app = App(outdir=str(tmp_path / "out"))
    layer = runtime_layer(Stack(app, "Layer"), include_powertools=False)
    app.synth()

    # The warning as the cloud assembly's manifest records it: read as JSON, because jsii's
    # proxy for `CloudArtifact.messages` raised "Unknown interface: ...MetadataEntry" in some
    # xdist workers' import orders (a struct its lazy loader then looks up as an interface).
    out = tmp_path / "out"
    artifact = json.loads((out / "manifest.json").read_text())["artifacts"]["Layer"]
    metadata = dict(artifact.get("metadata", {}))
    if "additionalMetadataFile" in artifact:  # newer CDKs write the stack's metadata apart
        metadata |= json.loads((out / artifact["additionalMetadataFile"]).read_text())
    warnings = [
        entry["data"]
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:warning" and "NoBytecode" in str(entry["data"])
    ]
    assert len(warnings) == 1 and "PAIL_CDK_PYTHON" in str(warnings[0])
    (asset,) = (tmp_path / "out").glob("asset.*")
    assert (asset / "python" / "pail" / "queue.py").is_file()
    assert not list(asset.rglob("*.pyc"))
    assert layer.node.id == "PailRuntimeLayer-arm64-nopowertools"


def test_given_example_synth_when_layer_is_staged_then_it_ships_the_installed_pail(
    example: Synthesis,
) -> None:
    layers = [p for p in example.outdir.glob("asset.*") if (p / "python" / "pail").is_dir()]
    assert layers, "no staged runtime layer in the example's cloud assembly"
    for layer in layers:
        (dist,) = [
            d
            for d in importlib.metadata.distributions(path=[str(layer / "python")])
            if d.metadata["Name"] == "pailq"
        ]
        assert dist.version == importlib.metadata.version("pailq")
        assert not (layer / "python" / "click").exists()
        assert not (layer / "python" / "rich").exists()
        assert not (layer / "python" / "pygments").exists()
