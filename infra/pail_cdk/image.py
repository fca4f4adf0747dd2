"""``worker_image``: a Fargate worker image built from the user's own folder.

``PailFargateWorker`` takes any ``ecs.ContainerImage`` with the ``pail``
command and the handler's module. ``worker_image(directory)`` makes one from a
folder of the user's repository (their handler modules, and a
``requirements.txt`` if they have dependencies), with ``pailq`` installed from
a wheel of the pail installed where ``cdk synth`` runs, so the tasks run the
same pail as the Lambda layer. ``pailq=`` installs another requirement
instead: a path to a wheel, or a pip requirement such as a git URL.

The build context is staged in the cache (``pail_cdk.cache``), never in the
user's tree: ``pail/`` (how pailq is installed), ``app/`` (a copy of the
folder, less ``exclude``) and the packaged ``worker.Dockerfile``. CDK copies it
into the cloud assembly at synth; ``cdk deploy`` builds it (that needs Docker).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import importlib.metadata
import importlib.resources
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from aws_cdk import aws_ecs as ecs

from pail_cdk import cache
from pail_cdk.distribution import DISTRIBUTION, InstalledPail
from pail_cdk.errors import PailCdkError

DOCKERFILE = "worker.Dockerfile"
"""The packaged Dockerfile of the worker image (``pail_cdk/worker.Dockerfile``)."""

DEFAULT_EXCLUDE = (
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "cdk.out",
    "__pycache__",
    "*.pyc",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "*.egg-info",
)
"""Names never copied from the user's folder into the image."""

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def worker_image(
    directory: str | os.PathLike[str],
    *,
    pailq: str | None = None,
    exclude: Sequence[str] = (),
    cache_dir: str | os.PathLike[str] | None = None,
) -> ecs.ContainerImage:
    """A worker image from ``directory`` (the handler modules) plus pailq.

    ::

        PailFargateWorker(
            self, "Exports", queue=queue, handler="report:run",
            image=worker_image("handlers"),
        )

    :param directory: the folder with the handler's module, put on ``PYTHONPATH``.
    :param pailq: how to install pailq: a path to a wheel, or a pip requirement
        (``"pailq @ git+https://..."``). Default: a wheel of the installed pailq.
    :param exclude: more names (glob patterns) to leave out of the copy.
    :param cache_dir: where the build context is staged (default: ``PAIL_CDK_CACHE``,
        else the user's cache folder).
    """
    context = stage_context(directory, pailq=pailq, exclude=exclude, cache_dir=cache_dir)
    return ecs.ContainerImage.from_asset(str(context), file=DOCKERFILE)


def stage_context(
    directory: str | os.PathLike[str],
    *,
    pailq: str | None = None,
    exclude: Sequence[str] = (),
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the worker image's build context; returns its folder (named by its content)."""
    source = Path(directory).resolve()
    if not source.is_dir():
        raise PailCdkError(f"worker_image: {source} is not a folder")
    images = cache.cache_dir(cache_dir) / "images"
    images.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix="staging-", dir=images))
    try:
        _copy_app(source, staged / "app", (*DEFAULT_EXCLUDE, *exclude))
        _write_pail(staged / "pail", pailq)
        dockerfile = importlib.resources.files("pail_cdk").joinpath(DOCKERFILE)
        (staged / DOCKERFILE).write_bytes(dockerfile.read_bytes())
        final = images / f"context-{_tree_digest(staged)}"
        try:
            staged.rename(final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(staged)  # the same content is there already (another synth made it)
        cache.prune(images, "context-*", keep=final, newest=8)
        return final
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _copy_app(source: Path, destination: Path, exclude: Sequence[str]) -> None:
    def ignored(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if any(fnmatch.fnmatch(n, pattern) for pattern in exclude)}

    shutil.copytree(source, destination, ignore=ignored)


def _write_pail(folder: Path, pailq: str | None) -> None:
    folder.mkdir()
    if pailq is None:
        wheel = build_wheel(InstalledPail.find(), folder)
        requirement = f"/tmp/pail/{wheel.name}"
    elif pailq.endswith(".whl") and Path(pailq).is_file():
        shutil.copyfile(pailq, folder / Path(pailq).name)
        requirement = f"/tmp/pail/{Path(pailq).name}"
    else:
        requirement = pailq
    (folder / "requirements.txt").write_text(requirement + "\n")


def build_wheel(pail: InstalledPail, folder: Path) -> Path:
    """A pure-Python wheel of the installed ``pail`` (metadata and console script included).

    Deterministic: the same installed pail gives the same bytes, so the image's
    asset hash only changes when pail does.
    """
    dist = importlib.metadata.distribution(DISTRIBUTION)
    info = f"{DISTRIBUTION}-{pail.version}.dist-info"
    entries: list[tuple[str, bytes]] = [
        (str(relative), path.read_bytes()) for relative, path in pail.files(lambda_only=False)
    ]
    entries.append((f"{info}/METADATA", (dist.read_text("METADATA") or "").encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode()))
    entries.append(
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: pail-cdk\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    )
    record = [f"{name},sha256={_b64_digest(data)},{len(data)}" for name, data in entries]
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = folder / f"{DISTRIBUTION}-{pail.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            member = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            member.external_attr = 0o644 << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(member, data)
    return wheel


def _b64_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            relative = PurePosixPath(*path.relative_to(folder).parts)
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]
