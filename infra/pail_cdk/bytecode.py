"""Bytecode for the layer, so a cold start never compiles on Lambda's read-only ``/opt``.

Without ``.pyc`` files Python compiles every module it imports on each cold
start, and cannot keep the result (``/opt`` is read-only): about 350 ms for
boto3, Powertools and pail. So the layer ships them, compiled:

* **by an interpreter of the layer's Python version**: bytecode is specific
  to it (``__pycache__/x.cpython-312.pyc``). The build interpreter serves when
  its version matches; else one is looked for (``PAIL_CDK_PYTHON``,
  ``python3.12`` on ``PATH``, pyenv's versions, the usual prefixes). If none is
  found the layer ships without bytecode, and the synth says so in a warning;
* **hash-based, unchecked** (``--invalidation-mode unchecked-hash``): CDK zips
  assets with every timestamp set to 1980-01-01, so the usual
  timestamp-validated ``.pyc`` would no longer match its source once deployed
  and would be ignored. An unchecked hash-based ``.pyc`` is used as is; the
  layer's sources never change after the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pail_cdk.errors import LayerBuildError
from pail_cdk.target import Target

ENV_PYTHON = "PAIL_CDK_PYTHON"
"""Environment variable: the interpreter that compiles the layer (it must be the layer's version)."""

LAMBDA_SITE = "/opt/python"
"""Where Lambda mounts a layer's ``python/`` folder: the paths recorded in tracebacks."""


def _version_of(python: str) -> str | None:
    try:
        result = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _candidates(version: str) -> list[str]:
    found = [os.environ.get(ENV_PYTHON, ""), sys.executable]
    found.append(shutil.which(f"python{version}") or "")
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found += sorted(
        (str(p) for p in pyenv.glob(f"versions/{version}*/bin/python{version}")), reverse=True
    )
    found += [f"{prefix}/bin/python{version}" for prefix in ("/usr/local", "/usr", "/opt/homebrew")]
    return [candidate for candidate in found if candidate]


def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` (``"3.12"``), or None; ``PAIL_CDK_PYTHON`` first."""
    seen: set[str] = set()
    for candidate in _candidates(version):
        if candidate in seen:
            continue
        seen.add(candidate)
        if _version_of(candidate) == version:
            return candidate
    explicit = os.environ.get(ENV_PYTHON)
    if explicit:
        raise LayerBuildError(
            f"{ENV_PYTHON}={explicit} is not a Python {version} interpreter, which the layer needs"
        )
    return None


def compile_tree(site: Path, target: Target, python: str) -> None:
    """Compile every ``.py`` under ``site`` to unchecked hash-based bytecode with ``python``.

    Tracebacks name the files where Lambda puts them (``/opt/python/...``).
    """
    result = subprocess.run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(site),
            "-p",
            LAMBDA_SITE,
            str(site),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        tail = " | ".join(line.strip() for line in result.stdout.strip().splitlines()[-3:])
        raise LayerBuildError(
            f"compiling the pail layer for Python {target.python_version} failed: {tail}"
        )
