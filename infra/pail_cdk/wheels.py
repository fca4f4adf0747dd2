"""Installing the layer's third-party wheels with pip, for the Lambda platform, without Docker.

pip runs with ``--platform``, ``--python-version`` and ``--only-binary=:all:``,
so it picks the manylinux wheels of the function's architecture and Python
whatever machine synthesises. Wheels come from the package index, or with
``PAIL_WHEELHOUSE`` (or a construct's ``wheelhouse``) from a folder of wheels
only (``--no-index --find-links``). pip's own configuration (``PIP_INDEX_URL``,
``PIP_FIND_LINKS``, ``pip.conf``) applies as usual.

When no wheel can be found (no index, no cache, no wheelhouse), the error is
one line naming both remedies, instead of pip's "Could not find a version".
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from pail_cdk.errors import LayerBuildError
from pail_cdk.target import Target

ENV_WHEELHOUSE = "PAIL_WHEELHOUSE"
"""Environment variable: a folder of wheels to build the layer from, without the index."""

_NOT_FOUND = ("Could not find a version that satisfies", "No matching distribution found")


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
    """``pip install`` ``requirements`` for ``target`` into ``destination``.

    ``wheels`` installs from that folder only (no index). A missing wheel
    raises ``LayerBuildError`` with a one-line remedy; ``cache`` is named in it.
    """
    if wheels is not None and not wheels.is_dir():
        raise LayerBuildError(f"the wheelhouse {wheels} ({ENV_WHEELHOUSE}) is not a folder")
    command = [
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
    if wheels is not None:
        command += ["--no-index", "--find-links", str(wheels)]
    result = subprocess.run([*command, *requirements], capture_output=True, text=True, check=False)
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
    raise LayerBuildError(f"pip could not install the pail Lambda layer's dependencies: {tail}")


def _missing_requirement(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if "satisfies the requirement" in line:
            rest = line.split("satisfies the requirement", 1)[1].strip()
            return rest.split(" (from", 1)[0].strip()
    return None
