"""Installing the layer's third-party wheels for the Lambda platform, without Docker.

The installer is uv when one is found (on ``PATH``, or the ``uv`` package's own
binary), else pip; ``PAIL_CDK_INSTALLER=pip`` or ``=uv`` chooses. Both install
the same files: the same versions of the same manylinux wheels (uv took 1.5 to
2.2 s where pip took 15 to 21 s for the layer of boto3 and Powertools, and the
two trees differ only in the installer's own ``dist-info`` bookkeeping).

Either runs with the target platform, ``--python-version`` and binary wheels
only, so it picks the wheels of the function's architecture and Python
whatever machine synthesises. Wheels come from the package index, or with
``PAIL_WHEELHOUSE`` (or a construct's ``wheelhouse``) from a folder of wheels
only (``--no-index --find-links``). Each installer's own configuration applies
as usual (``PIP_INDEX_URL``, ``pip.conf``; ``UV_DEFAULT_INDEX``, ``uv.toml``).

When no wheel can be found (no index, no cache, no wheelhouse), the error is
one line naming both remedies, instead of the installer's own message.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pail_cdk.errors import LayerBuildError
from pail_cdk.target import Target

ENV_WHEELHOUSE = "PAIL_WHEELHOUSE"
"""Environment variable: a folder of wheels to build the layer from, without the index."""

ENV_INSTALLER = "PAIL_CDK_INSTALLER"
"""Environment variable: ``uv`` or ``pip``, the installer of the layer's wheels (default: uv if found)."""

_NOT_FOUND = (
    "Could not find a version that satisfies",
    "No matching distribution found",
    # uv's words for the same
    "was not found in the package registry",
    "was not found in the provided package locations",
    "requirements are unsatisfiable",
)
_UV_PLATFORMS = {
    "manylinux2014_x86_64": "x86_64-manylinux2014",
    "manylinux2014_aarch64": "aarch64-manylinux2014",
}


def find_uv() -> str | None:
    """The uv binary to install with: ``uv`` on ``PATH``, else the ``uv`` package's; None if neither."""
    on_path = shutil.which("uv")
    if on_path is not None:
        return on_path
    if importlib.util.find_spec("uv") is not None:
        from uv import find_uv_bin  # the uv package ships its binary

        try:
            return str(find_uv_bin())
        except FileNotFoundError:
            return None
    return None


def installer() -> str:
    """``uv`` or ``pip``: ``PAIL_CDK_INSTALLER`` if set, else uv when ``find_uv`` finds one."""
    chosen = os.environ.get(ENV_INSTALLER, "").strip().lower()
    if chosen not in ("", "uv", "pip"):
        raise LayerBuildError(f"{ENV_INSTALLER} must be 'uv' or 'pip', not {chosen!r}")
    if chosen == "uv" and find_uv() is None:
        raise LayerBuildError(f"{ENV_INSTALLER}=uv, but no uv was found on PATH")
    return chosen or ("uv" if find_uv() is not None else "pip")


def wheelhouse(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The wheelhouse to use: ``explicit``, else ``$PAIL_WHEELHOUSE``, else None (the index)."""
    if explicit is not None:
        return Path(explicit)
    configured = os.environ.get(ENV_WHEELHOUSE)
    return Path(configured) if configured else None


def download_command(target: Target, requirements: Sequence[str], folder: str) -> str:
    """The ``pip download`` command that fills a wheelhouse for ``target`` (for the error text)."""
    quoted = " ".join(f"'{requirement}'" for requirement in requirements)
    return (
        f"pip download --only-binary=:all: --platform {target.platform} "
        f"--python-version {target.python_version} --implementation cp -d {folder} {quoted}"
    )


def install(
    requirements: Sequence[str],
    destination: Path,
    target: Target,
    *,
    wheels: Path | None = None,
    cache: Path | None = None,
) -> None:
    """Install ``requirements`` for ``target`` into ``destination`` (with ``installer()``).

    ``wheels`` installs from that folder only (no index). A missing wheel
    raises ``LayerBuildError`` with a one-line remedy; ``cache`` is named in it.
    """
    if wheels is not None and not wheels.is_dir():
        raise LayerBuildError(f"the wheelhouse {wheels} ({ENV_WHEELHOUSE}) is not a folder")
    tool = installer()
    command = (
        _uv_command(target, destination) if tool == "uv" else _pip_command(target, destination)
    )
    if wheels is not None:
        command += ["--no-index", "--find-links", str(wheels)]
    result = subprocess.run([*command, *requirements], capture_output=True, text=True, check=False)
    # uv leaves its lock file in the target folder; it is no part of the layer.
    (destination / ".lock").unlink(missing_ok=True)
    if result.returncode == 0:
        return
    if any(marker in result.stderr for marker in _NOT_FOUND):
        missing = _missing_requirement(result.stderr) or ", ".join(requirements)
        where = f"the wheelhouse {wheels}" if wheels is not None else "the package index"
        raise LayerBuildError(
            f"cannot build the pail Lambda layer offline: no {target.platform} wheel for "
            f"Python {target.python_version} of {missing} in {where}, and no cached layer in "
            f"{cache or 'the cache'}; either run the synth once with the package index "
            f"reachable (it fills the cache), or set {ENV_WHEELHOUSE} to a folder of wheels "
            f"made by: {download_command(target, requirements, 'WHEELHOUSE')}"
        )
    tail = " | ".join(line.strip() for line in result.stderr.strip().splitlines()[-3:])
    raise LayerBuildError(f"{tool} could not install the pail Lambda layer's dependencies: {tail}")


def _pip_command(target: Target, destination: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
        str(destination),
        "--platform",
        target.platform,
        "--implementation",
        "cp",
        "--python-version",
        target.python_version,
        "--only-binary=:all:",
        "--no-compile",
    ]


def _uv_command(target: Target, destination: Path) -> list[str]:
    uv = find_uv()
    assert uv is not None  # installer() chose uv because it found one
    return [
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        sys.executable,  # only for uv to start from; the platform and version below decide
        "--target",
        str(destination),
        "--python-platform",
        _UV_PLATFORMS[target.platform],
        "--python-version",
        target.python_version,
        "--only-binary",
        ":all:",
        "--no-compile",
    ]


def _missing_requirement(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if "satisfies the requirement" in line:
            rest = line.split("satisfies the requirement", 1)[1].strip()
            return rest.split(" (from", 1)[0].strip()
    return None
