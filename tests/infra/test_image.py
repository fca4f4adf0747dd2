"""``worker_image``: the Fargate image's build context, staged from the user's folder."""

from __future__ import annotations

import importlib.metadata
import zipfile
from pathlib import Path

from pail_cdk.distribution import InstalledPail
from pail_cdk.image import DOCKERFILE, build_wheel, stage_context


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "handlers"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "report.py").write_text("def run(payload):\n    return payload\n")
    (folder / "requirements.txt").write_text("requests\n")
    (folder / "__pycache__" / "report.cpython-312.pyc").write_bytes(b"stale")
    (folder / ".venv").mkdir()
    return folder


def test_given_a_user_folder_when_staged_then_the_context_holds_app_wheel_and_dockerfile(
    tmp_path: Path,
) -> None:
    context = stage_context(user_folder(tmp_path), cache_dir=tmp_path / "cache")

    assert context.is_relative_to(tmp_path / "cache")
    assert (context / DOCKERFILE).read_text().startswith("# The pail worker image")
    assert sorted(p.name for p in (context / "app").iterdir()) == ["report.py", "requirements.txt"]
    (wheel,) = (context / "pail").glob("*.whl")
    assert wheel.name == f"pailq-{importlib.metadata.version('pailq')}-py3-none-any.whl"
    assert (context / "pail" / "requirements.txt").read_text() == f"/tmp/pail/{wheel.name}\n"
    assert not list(
        (tmp_path / "handlers").glob("Dockerfile*")
    )  # nothing written to the user's tree


def test_given_the_same_folder_when_staged_twice_then_the_context_is_the_same(
    tmp_path: Path,
) -> None:
    first = stage_context(user_folder(tmp_path), cache_dir=tmp_path / "cache")
    second = stage_context(tmp_path / "handlers", cache_dir=tmp_path / "cache")

    assert first == second
    (tmp_path / "handlers" / "report.py").write_text("def run(payload):\n    return 1\n")
    assert stage_context(tmp_path / "handlers", cache_dir=tmp_path / "cache") != first


def test_given_a_requirement_when_staged_then_pailq_is_installed_from_it_and_no_wheel_is_built(
    tmp_path: Path,
) -> None:
    requirement = "pailq[lambda] @ git+https://git.example.invalid/pail.git@v0.3.0"

    context = stage_context(user_folder(tmp_path), pailq=requirement, cache_dir=tmp_path / "c")

    assert (context / "pail" / "requirements.txt").read_text() == requirement + "\n"
    assert not list((context / "pail").glob("*.whl"))


def test_given_the_installed_pail_when_wheeled_then_it_holds_every_module_metadata_and_the_command(
    tmp_path: Path,
) -> None:
    pail = InstalledPail.find()
    wheel = build_wheel(pail, tmp_path)
    (tmp_path / "again").mkdir()
    again = build_wheel(pail, tmp_path / "again")

    assert wheel.read_bytes() == again.read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"pailq-{pail.version}.dist-info"
        assert {"pail/cli/__init__.py", "pail/local.py", "pail/aws/reaper.py"} <= names
        assert "pail = pail.cli:main" in archive.read(f"{info}/entry_points.txt").decode()
        metadata = archive.read(f"{info}/METADATA").decode()
        assert metadata == importlib.metadata.distribution("pailq").read_text("METADATA")
        record = archive.read(f"{info}/RECORD").decode().splitlines()
        assert len(record) == len(names)
