"""Building what the rehearsal deploys: the wheel, the user's environment and app, the synth, the runtime.

Everything happens in a temporary folder outside this checkout, by running
the documents' own code blocks: the README's Install block builds the wheel
(in a copy of the sources), and ``docs/deploy.md``'s blocks make the user's
virtual environment, write their files and synthesise with the CDK CLI. The
only substitutions are the wheel's folder for ``/path/to/``, this machine's
pinned CDK CLI (``infra/node_modules``, as ``scripts/synth`` installs it) for
``npx aws-cdk@VERSION``, and this interpreter for ``python``/``pip``. And pip
does not byte-compile what it installs in the user's environment
(``NO_BYTECODE``): the installed files are the same, and the synth compiles
the modules it imports. Node runs with one V8 helper thread (``NODE_THREADS``), as in
every infrastructure test.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DEPLOY = ROOT / "docs" / "deploy.md"
INFRA = ROOT / "infra"

_BLOCK = re.compile(
    r"(?:<!-- file: (?P<file>\S+) -->\s*\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```",
    re.DOTALL | re.MULTILINE,
)
_NPX_CDK = re.compile(r"npx aws-cdk@(\S+)")
_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "runtime", "infra", "scripts")
_NOT_SOURCES = shutil.ignore_patterns(
    "node_modules", "cdk.out", "__pycache__", "*.pyc", "*.egg-info", "build", "dist"
)


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, its text, and the file it is (``<!-- file: ... -->``)."""

    language: str
    body: str
    file: str | None = None


def blocks(document: Path) -> list[Block]:
    """Every fenced code block of ``document``, in order."""
    return [
        Block(m.group("lang"), m.group("body"), m.group("file"))
        for m in _BLOCK.finditer(document.read_text())
    ]


def install_block(document: Path = README) -> str:
    """The README's Install block: the one bash block under ``## Install``."""
    text = document.read_text()
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    (body,) = [m.group("body") for m in _BLOCK.finditer(section) if m.group("lang") == "bash"]
    return body


def pinned_cdk_version() -> str:
    """The CDK CLI version ``infra/package.json`` pins (what ``scripts/synth`` runs)."""
    version: str = json.loads((INFRA / "package.json").read_text())["devDependencies"]["aws-cdk"]
    return version


def cdk_cli() -> Path:
    """The pinned CDK CLI in ``infra/node_modules``, installed as ``scripts/synth`` does."""
    cli = INFRA / "node_modules" / ".bin" / "cdk"
    stamp = INFRA / "node_modules" / ".pail-lock"
    want = hashlib.sha256((INFRA / "package-lock.json").read_bytes()).hexdigest()[:16]
    if not cli.exists() or not stamp.exists() or stamp.read_text().strip() != want:
        subprocess.run(
            ["npm", "ci", "--prefix", str(INFRA), "--no-audit", "--no-fund", "--loglevel=error"],
            check=True,
            capture_output=True,
        )
        stamp.write_text(want + "\n")
    return cli


NODE_THREADS = "--v8-pool-size=1"
"""The Node option that gives V8 one background thread (its default is four) in every Node
process the tests start: the CDK CLI, and the jsii kernel behind aws_cdk in pytest and in
the user's app. Most of a synth's Node CPU is aws-cdk-lib's built-in CloudFormation
validation engine (``@aws-cdk/core:validateAgainstDefaultRules``; a WebAssembly module set
up once per process), and on two busy cores V8's parallel helpers spend more CPU than they
save there: building the engine took 7.0 to 7.9 CPU-s with four, 3.8 to 3.9 with one, at
the same or a shorter wall time. What runs, and what it reports, is the same."""


def node_options(current: str = "") -> str:
    """``current`` (a ``NODE_OPTIONS`` value) with ``NODE_THREADS`` in it, once."""
    if "--v8-pool-size" in current:
        return current
    return f"{current} {NODE_THREADS}".strip()


def clean_env(path: list[Path]) -> dict[str, str]:
    """An environment with nothing of this checkout or its venv in it, the CDK CLI quiet,
    and Node with one V8 helper thread (``NODE_THREADS``)."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME", "PAIL_CDK_CACHE", "CI")
    # The machine's installer settings stay (an index, a CA bundle): they are not the checkout's.
    installers = ("PIP_", "UV_", "SSL_CERT_")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith(installers)}
    env["PATH"] = os.pathsep.join([*(str(p) for p in path), "/usr/local/bin", "/usr/bin", "/bin"])
    env |= {
        "CDK_DISABLE_VERSION_CHECK": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "18,19,20,21,22",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "NODE_OPTIONS": node_options(os.environ.get("NODE_OPTIONS", "")),
    }
    return env


def shims(folder: Path, python: str = sys.executable) -> Path:
    """``python``, ``pip`` and ``cdk`` commands: this interpreter and the pinned CDK CLI."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, command in (
        ("python", f'exec "{python}" "$@"'),
        ("pip", f'exec "{python}" -m pip "$@"'),
    ):
        (folder / name).write_text(f"#!/bin/sh\n{command}\n")
        (folder / name).chmod(0o755)
    return folder


def run_bash(script: str, cwd: Path, env: dict[str, str], log: Path) -> None:
    """Run ``script`` with ``bash -euo pipefail``; its output goes to ``log``, and into the failure."""
    with log.open("ab") as out:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=900,
        )
    if result.returncode != 0:
        text = log.read_text(errors="replace")
        lines = [line for line in text.splitlines() if not line.startswith("WARNING: Location")]
        raise AssertionError(f"`{script.strip()}` failed in {cwd}:\n" + "\n".join(lines[-40:]))


def build_wheel(workdir: Path, env: dict[str, str], log: Path) -> Path:
    """Run the README's Install block in a copy of the sources; returns the wheel it built."""
    source = workdir / "pail"
    source.mkdir(parents=True)
    for name in _SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=_NOT_SOURCES)
        else:
            shutil.copyfile(origin, source / name)
    run_bash(install_block(), source, env, log)
    (wheel,) = (source / "dist").glob("pailq-*.whl")
    return wheel


@dataclass(frozen=True)
class UserApp:
    """The user's app folder after ``docs/deploy.md`` ran in it."""

    folder: Path
    venv: Path
    cdk_out: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def write_user_app(folder: Path, document: Path = DEPLOY) -> list[str]:
    """Write every ``<!-- file: ... -->`` block of ``document`` into ``folder``; their paths."""
    written = []
    for block in blocks(document):
        if block.file is None:
            continue
        path = folder / block.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.body)
        written.append(block.file)
    return written


def deploy_script(wheel: Path, cdk: Path, document: Path = DEPLOY) -> str:
    """``document``'s bash blocks, as one script, with the rehearsal's substitutions."""
    script = "\n".join(b.body for b in blocks(document) if b.language == "bash")
    versions = set(_NPX_CDK.findall(script))
    if versions != {pinned_cdk_version()}:
        raise AssertionError(
            f"{document.name} runs the CDK CLI {versions}, the repository pins {pinned_cdk_version()}"
        )
    script = _NPX_CDK.sub(str(cdk), script)
    return script.replace("/path/to/", f"{wheel.parent}/")


NO_BYTECODE = {"PIP_COMPILE": "0"}
"""pip's ``--no-compile`` as an environment variable (``PIP_NO_COMPILE=1`` would mean the
opposite: pip reads a ``--no-`` option's variable as the option's value). Byte-compiling
every module of aws_cdk (237 MB) was 40 of the install's 50 CPU-seconds; the synth then
compiles only the few it imports (about 8 CPU-seconds more on its first run)."""


def run_user_app(folder: Path, wheel: Path, env: dict[str, str], log: Path) -> UserApp:
    """Write the app and run ``docs/deploy.md``'s commands in ``folder``: install, then synth."""
    folder.mkdir(parents=True, exist_ok=True)
    write_user_app(folder)
    run_bash(deploy_script(wheel, cdk_cli()), folder, env | NO_BYTECODE, log)
    return UserApp(folder, folder / ".venv", folder / "cdk.out")


def host_platform() -> str:
    """The manylinux platform tag of this machine."""
    machine = platform.machine()
    return f"manylinux2014_{'aarch64' if machine in {'arm64', 'aarch64'} else machine}"


@dataclass(frozen=True)
class LambdaRuntime:
    """A Python of the functions' version that holds nothing but awslambdaric (Lambda's ``/var/runtime``)."""

    python: Path
    ric: Path
    version: str


def lambda_runtime(folder: Path, python: str, version: str, log: Path) -> LambdaRuntime:
    """A bare venv of ``python`` (no pip, nothing installed) plus awslambdaric in its own folder."""
    venv = folder / "python"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    ric = folder / "runtime"
    with log.open("ab") as out:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
                str(ric),
                "--platform",
                host_platform(),
                "--implementation",
                "cp",
                "--python-version",
                version,
                "--only-binary=:all:",
                "awslambdaric",
            ],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return LambdaRuntime(venv / "bin" / "python", ric, version)
