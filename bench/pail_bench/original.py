"""The original pailq 0.1.1 in its own virtualenv, installed from the package index, unmodified.

Its import name is ``pail``, like ours, so it can never share a process with
this project: it lives in ``.bench-venv/`` at the repository root and is
driven through ``pail_bench.driver`` run by that venv's interpreter.
``ensure`` builds the venv when it is missing and then proves the install is
untouched: every file of the package must match the hash pip recorded for it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

VERSION = "0.1.1"
REQUIREMENT = f"pailq=={VERSION}"
MIN_PYTHON = (3, 12)

_PROBE = """
import importlib.metadata as md, json, sys
dist = md.distribution("pailq")
import pail
print(json.dumps({
    "version": dist.version,
    "python": sys.version.split()[0],
    "module": pail.__file__,
    "record": str(dist.locate_file("")),
    "files": [str(f) for f in dist.files or []],
}))
"""


class OriginalUnavailableError(RuntimeError):
    """The original could not be installed or failed its integrity check."""


@dataclass(frozen=True)
class Original:
    """The interpreter that imports the original, and what was checked about it."""

    python: Path
    version: str
    python_version: str
    module: str
    files_verified: int


def _probe(python: Path) -> dict[str, object] | None:
    if not python.is_file():
        return None
    found = subprocess.run(
        [str(python), "-c", _PROBE], capture_output=True, text=True, check=False, timeout=60
    )
    if found.returncode != 0:
        return None
    probe: dict[str, object] = json.loads(found.stdout)
    return probe


def _install(root: Path) -> None:
    if sys.version_info < MIN_PYTHON:  # pragma: no cover - the project venv is 3.12+
        raise OriginalUnavailableError("the original needs Python >= 3.12")
    print(f"==> installing the original {REQUIREMENT} into {root}", file=sys.stderr)
    uv = shutil.which("uv")
    if uv is not None:  # the dev environment has uv: seconds instead of minutes
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(root)], check=True)
        # --no-config: the original resolves on its own, not under this project's pins.
        command = [uv, "pip", "install", "--quiet", "--no-config"]
        command += ["--python", str(root / "bin" / "python")]
    else:
        venv.EnvBuilder(clear=True, with_pip=True).create(root)
        command = [str(root / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        command += ["--quiet", "install"]
    installed = subprocess.run([*command, REQUIREMENT], check=False, timeout=600)
    if installed.returncode != 0:
        raise OriginalUnavailableError(f"could not install {REQUIREMENT} ({command[0]})")


def _verify_record(site: Path) -> int:
    """Check every installed file of the distribution against its installer's RECORD; return how many."""
    records = list(site.glob(f"pailq-{VERSION}.dist-info/RECORD"))
    if not records:
        raise OriginalUnavailableError(f"no RECORD for pailq {VERSION} in {site}")
    checked = 0
    with records[0].open(newline="") as handle:
        for path, digest, _size in csv.reader(handle):
            if not digest or not path.startswith("pail/"):
                continue
            algorithm, _, expected = digest.partition("=")
            actual = hashlib.new(algorithm, (site / path).read_bytes()).digest()
            if base64.urlsafe_b64encode(actual).rstrip(b"=").decode() != expected:
                raise OriginalUnavailableError(f"{path} differs from the released pailq {VERSION}")
            checked += 1
    if checked == 0:
        raise OriginalUnavailableError("the original's RECORD lists no pail/ files")
    return checked


def ensure(root: Path) -> Original:
    """The original's venv at ``root``, installed if missing, verified as released."""
    python = root / "bin" / "python"
    probe = _probe(python)
    if probe is None or probe.get("version") != VERSION:
        _install(root)
        probe = _probe(python)
    if probe is None or probe.get("version") != VERSION:
        raise OriginalUnavailableError(f"{python} does not import pailq {VERSION}")
    site = Path(str(probe["record"]))
    return Original(
        python=python,
        version=str(probe["version"]),
        python_version=str(probe["python"]),
        module=str(probe["module"]),
        files_verified=_verify_record(site),
    )
