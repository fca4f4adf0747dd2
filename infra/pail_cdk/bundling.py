"""Lambda packaging without Docker: the pail runtime layer, built locally by pip.

``PythonFunction`` from the alpha module bundles in a container, which needs a
Docker engine. pail does not: ``LocalPipBundling`` implements CDK's
``ILocalBundling`` and runs ``pip install --target`` for the Lambda platform
(manylinux wheels for the function's architecture and Python version), so
``cdk synth`` works on any machine with Python.

The layer holds two parts:

* the third-party dependencies, read from ``pyproject.toml``: the project's
  ``dependencies`` and, unless the public Powertools layer is used instead, the
  ``lambda`` extra (Powertools). The AWS SDK comes along: the protocol relies on
  conditional writes, so the layer pins an SDK that has them instead of
  trusting the one in the Lambda runtime. pip installs these once per set of
  requirements and platform, into a cache under ``.cache/pail-cdk/`` (or
  ``$PAIL_CDK_CACHE``); only that first build needs the package index.
* the ``pail`` package itself, pure Python, copied from ``runtime/pail`` on
  every synth (with a small ``pailq`` dist-info), so a change to the runtime
  never waits for pip.

The asset hash is a hash of both, so an unchanged layer is not uploaded again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root: where ``pyproject.toml`` and ``runtime/`` live."""

PYTHON_VERSION = "3.12"
"""The Python version of every pail Lambda function and of the wheels in its layer."""

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_12
"""The Lambda runtime matching ``PYTHON_VERSION``."""

DISTRIBUTION = "pailq"
"""The name of the distribution built from ``runtime/``."""

PACKAGE = "pail"
"""The import package inside ``runtime/``."""

LAMBDA_EXTRA = "lambda"
"""The ``pyproject.toml`` extra that holds the Lambda-only dependencies (Powertools)."""

POWERTOOLS_SSM_PARAMETER = "/aws/service/powertools/python/{arch}/python{version}/latest"
"""The public SSM parameter that holds the ARN of the latest public Powertools layer."""

# Bump when the layout or the build steps change, so old cache entries are not reused.
_FORMAT = "2"
_PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
_SKIP_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def _architecture_name(architecture: lambda_.Architecture) -> str:
    name = architecture.name
    if name not in _PLATFORMS:
        raise ValueError(f"unsupported Lambda architecture {name!r}")
    return name


def _package_files(root: Path) -> list[Path]:
    """The files of the ``pail`` package, in a stable order."""
    files: list[Path] = []
    for directory, dirnames, filenames in os.walk(root / "runtime" / PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        files.extend(
            Path(directory) / name for name in sorted(filenames) if not name.endswith(".pyc")
        )
    return files


@dataclass(frozen=True, slots=True)
class RuntimeBundle:
    """The layer content for one platform: the pail runtime plus its dependencies.

    ``write(directory)`` fills a folder with ``python/``, the layout a Lambda
    layer expects; ``key()`` names that content.
    """

    architecture: str = "arm64"
    include_powertools: bool = True
    root: Path = REPO_ROOT
    python_version: str = PYTHON_VERSION

    @property
    def platform(self) -> str:
        """The pip platform tag of the wheels to install."""
        return _PLATFORMS[self.architecture]

    def _project(self) -> dict[str, Any]:
        project: dict[str, Any] = tomllib.loads((self.root / "pyproject.toml").read_text())[
            "project"
        ]
        return project

    @property
    def version(self) -> str:
        """The ``pailq`` version, from ``pyproject.toml``."""
        return str(self._project()["version"])

    @property
    def requirements(self) -> tuple[str, ...]:
        """The third-party requirements, from ``pyproject.toml``."""
        project = self._project()
        requirements = list(project.get("dependencies", []))
        if self.include_powertools:
            requirements += project["optional-dependencies"][LAMBDA_EXTRA]
        return tuple(requirements)

    def dependencies_key(self) -> str:
        """A hash of what decides the third-party part: requirements and platform."""
        digest = hashlib.sha256()
        for part in (_FORMAT, self.architecture, self.python_version, *self.requirements):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:20]

    def key(self) -> str:
        """A hash of the whole layer: the dependencies and every file of the package."""
        digest = hashlib.sha256(self.dependencies_key().encode() + self.version.encode())
        for path in _package_files(self.root):
            digest.update(str(path.relative_to(self.root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        return digest.hexdigest()[:20]

    def cache_dir(self) -> Path:
        """Where built dependency folders are kept."""
        configured = os.environ.get("PAIL_CDK_CACHE")
        return Path(configured) if configured else self.root / ".cache" / "pail-cdk"

    def dependencies(self) -> Path:
        """The folder holding ``python/`` with the third-party part, installed now if needed."""
        cache = self.cache_dir()
        target = cache / f"deps-{self.dependencies_key()}"
        if (target / "python").is_dir():
            return target
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(cache / ".lock"):
            if not (target / "python").is_dir():
                self._install_dependencies(target)
                _prune(cache, keep=target)
        return target

    def write(self, directory: Path) -> None:
        """Fill ``directory`` with the layer: ``python/`` holding the dependencies and pail."""
        _copy_tree(self.dependencies(), directory)
        site = directory / "python"
        package = self.root / "runtime" / PACKAGE
        for path in _package_files(self.root):
            destination = site / PACKAGE / path.relative_to(package)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
        info = site / f"{DISTRIBUTION}-{self.version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {self.version}\n"
        )
        (info / "INSTALLER").write_text("pail-cdk\n")
        (info / "RECORD").write_text("")
        (info / "top_level.txt").write_text(f"{PACKAGE}\n")

    def _install_dependencies(self, target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="pail-deps-", dir=target.parent) as tmp:
            staged = Path(tmp) / "layer"
            _pip(
                "install",
                "--target",
                str(staged / "python"),
                "--platform",
                self.platform,
                "--implementation",
                "cp",
                "--python-version",
                self.python_version,
                "--only-binary=:all:",
                "--no-compile",
                *self.requirements,
            )
            shutil.rmtree(staged / "python" / "bin", ignore_errors=True)
            staged.rename(target)


def _prune(cache: Path, *, keep: Path, newest: int = 4) -> None:
    """Delete all but the ``newest`` cached builds (``keep`` always stays)."""
    builds = sorted(cache.glob("deps-*"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in builds[newest:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"building the pail Lambda layer failed: {' '.join(command)}\n{result.stderr}"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _copy_tree(source: Path, destination: Path) -> None:
    """Copy ``source`` into ``destination``, hard-linking files when both share a disk."""

    def link_or_copy(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        return dst

    shutil.copytree(source, destination, copy_function=link_or_copy, dirs_exist_ok=True)


@jsii.implements(ILocalBundling)
class LocalPipBundling:
    """CDK local bundling that installs the pail runtime with pip, no Docker.

    It always succeeds or raises, so CDK never falls back to a container.
    """

    def __init__(self, bundle: RuntimeBundle) -> None:
        self.bundle = bundle

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_options: Any) -> bool:
        """Fill ``output_dir`` with the layer content (installing dependencies if needed)."""
        self.bundle.write(Path(output_dir))
        return True


def runtime_layer_code(bundle: RuntimeBundle) -> lambda_.Code:
    """An asset holding ``bundle``, bundled locally; its hash is the bundle's key."""
    return lambda_.Code.from_asset(
        str(bundle.root / "runtime"),
        asset_hash=bundle.key(),
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(
            image=LAMBDA_RUNTIME.bundling_image,
            local=LocalPipBundling(bundle),
            command=["false"],  # never runs: local bundling always succeeds or raises
        ),
    )


def runtime_layer(
    scope: Construct,
    *,
    architecture: lambda_.Architecture = lambda_.Architecture.ARM_64,
    include_powertools: bool = True,
) -> lambda_.ILayerVersion:
    """The stack's one layer holding the pail runtime (and Powertools), for ``architecture``.

    Every pail function of a stack with the same architecture shares it.
    """
    arch = _architecture_name(architecture)
    stack = Stack.of(scope)
    layer_id = f"PailRuntimeLayer-{arch}" + ("" if include_powertools else "-nopowertools")
    existing = stack.node.try_find_child(layer_id)
    if isinstance(existing, lambda_.LayerVersion):
        return existing
    bundle = RuntimeBundle(architecture=arch, include_powertools=include_powertools)
    extra = " and Powertools" if include_powertools else ""
    return lambda_.LayerVersion(
        stack,
        layer_id,
        code=runtime_layer_code(bundle),
        compatible_runtimes=[LAMBDA_RUNTIME],
        compatible_architectures=[architecture],
        description=f"pail runtime{extra} for Python {PYTHON_VERSION} on {arch}",
    )


def public_powertools_layer(
    scope: Construct, *, architecture: lambda_.Architecture = lambda_.Architecture.ARM_64
) -> lambda_.ILayerVersion:
    """The public Powertools layer, its ARN resolved from SSM at deploy time (no lookup at synth).

    Use it with ``runtime_layer(include_powertools=False)``.
    """
    arch = _architecture_name(architecture)
    stack = Stack.of(scope)
    layer_id = f"PowertoolsPublicLayer-{arch}"
    existing = stack.node.try_find_child(layer_id)
    if existing is not None:
        return existing  # type: ignore[return-value]
    arn = ssm.StringParameter.value_for_string_parameter(
        stack, POWERTOOLS_SSM_PARAMETER.format(arch=arch, version=PYTHON_VERSION)
    )
    return lambda_.LayerVersion.from_layer_version_arn(stack, layer_id, arn)


def pail_layers(
    scope: Construct,
    *,
    architecture: lambda_.Architecture = lambda_.Architecture.ARM_64,
    public_powertools: bool = False,
) -> list[lambda_.ILayerVersion]:
    """The layers a pail function needs: the runtime, with Powertools bundled or public."""
    layers = [
        runtime_layer(scope, architecture=architecture, include_powertools=not public_powertools)
    ]
    if public_powertools:
        layers.append(public_powertools_layer(scope, architecture=architecture))
    return layers
