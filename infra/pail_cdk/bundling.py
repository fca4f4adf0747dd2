"""The pail runtime layer, built locally from the installed pail: no Docker, no source tree.

``PythonFunction`` from the alpha module bundles in a container, which needs a
Docker engine. pail does not: ``LocalPipBundling`` implements CDK's
``ILocalBundling``, so ``cdk synth`` works on any machine with Python.

The layer (``python/``, as Lambda mounts it at ``/opt/python``) holds:

* **the third-party dependencies** of the installed ``pailq``
  (``pail_cdk.distribution``): its requirements and, unless the public
  Powertools layer is used instead, its ``lambda`` extra, evaluated for the
  Lambda platform and installed (by uv or pip) as manylinux wheels for the function's
  architecture and Python (``pail_cdk.wheels``), less the ``pail`` command's
  stack. The AWS SDK comes along: the protocol relies on conditional writes,
  so the layer pins an SDK that has them instead of trusting the runtime's.
  This part is built once per set of requirements and platform, into the
  cache (``pail_cdk.cache``: a user cache folder, ``PAIL_CDK_CACHE``), from
  the package index or a wheelhouse (``PAIL_WHEELHOUSE``); after that the
  synth needs no network;
* **pail itself**: the files of the installed distribution and its metadata,
  copied on every synth, so the layer always holds the pail the app runs with;
* **bytecode** for both, compiled for the layer's Python, hash-based
  (``pail_cdk.bytecode``), so a cold start does not compile.

The asset hash is a hash of all three, so an unchanged layer is not uploaded again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Annotations, AssetHashType, BundlingOptions, DockerImage, ILocalBundling, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from pail_cdk import bytecode, cache, wheels
from pail_cdk.distribution import DISTRIBUTION, LAMBDA_EXTRA, PACKAGE, InstalledPail
from pail_cdk.errors import LayerBuildError
from pail_cdk.target import LAMBDA_RUNTIME, PYTHON_VERSION, Target, architecture_name

__all__ = [
    "DISTRIBUTION",
    "LAMBDA_EXTRA",
    "LAMBDA_RUNTIME",
    "PACKAGE",
    "POWERTOOLS_SSM_PARAMETER",
    "PYTHON_VERSION",
    "LocalPipBundling",
    "RuntimeBundle",
    "pail_layers",
    "public_powertools_layer",
    "runtime_layer",
    "runtime_layer_code",
]

POWERTOOLS_SSM_PARAMETER = "/aws/service/powertools/python/{arch}/python{version}/latest"
"""The public SSM parameter that holds the ARN of the latest public Powertools layer."""

NO_BYTECODE_WARNING = (
    "pail: no Python {version} interpreter was found to compile the layer's bytecode, so every "
    "cold start compiles pail, boto3 and Powertools (about 350 ms); install Python {version} "
    "or point PAIL_CDK_PYTHON at one, and synthesise again."
)

# Bump when the layout or the build steps change, so old cache entries are not reused.
_FORMAT = "3"
_pythons: dict[str, str | None] = {}


def _python_for(version: str) -> str | None:
    """The interpreter that compiles bytecode for ``version``, looked up once per process."""
    if version not in _pythons:
        _pythons[version] = bytecode.find_python(version)
    return _pythons[version]


@dataclass(frozen=True)
class RuntimeBundle:
    """The layer content for one platform: the installed pail plus its dependencies.

    ``write(directory)`` fills a folder with ``python/``, the layout a Lambda
    layer expects; ``key()`` names that content. ``cache`` and ``wheelhouse``
    default to ``PAIL_CDK_CACHE`` (else the user's cache folder) and
    ``PAIL_WHEELHOUSE`` (else the package index).
    """

    architecture: str = "arm64"
    include_powertools: bool = True
    python_version: str = PYTHON_VERSION
    cache: str | None = None
    wheelhouse: str | None = None
    pail: InstalledPail = field(default_factory=lambda: InstalledPail.find(), compare=False)

    def __post_init__(self) -> None:
        Target(self.architecture, self.python_version)  # validates both
        _check_imported_pail(self.pail)

    @property
    def target(self) -> Target:
        """The platform the layer is built for."""
        return Target(self.architecture, self.python_version)

    @property
    def platform(self) -> str:
        """The pip platform tag of the wheels to install."""
        return self.target.platform

    @property
    def version(self) -> str:
        """The version of the installed ``pailq``, which the layer ships."""
        return self.pail.version

    @property
    def requirements(self) -> tuple[str, ...]:
        """The third-party requirements the layer installs, evaluated for the Lambda platform."""
        extras = (LAMBDA_EXTRA,) if self.include_powertools else ()
        return self.pail.requirements(self.target, extras=extras)

    @property
    def bytecode_python(self) -> str | None:
        """The interpreter that compiles the layer's bytecode, or None (no bytecode)."""
        return _python_for(self.python_version)

    def dependencies_key(self) -> str:
        """A hash of what decides the third-party part: requirements, platform, bytecode."""
        digest = hashlib.sha256()
        compiled = "bytecode" if self.bytecode_python else "source"
        for part in (_FORMAT, self.architecture, self.python_version, compiled, *self.requirements):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:20]

    def key(self) -> str:
        """A hash of the whole layer: the dependencies and every file of the installed pail."""
        digest = hashlib.sha256(self.dependencies_key().encode() + self.version.encode())
        for relative, path in self.pail.files():
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:20]

    def cache_dir(self) -> Path:
        """Where built dependency folders are kept."""
        return cache.cache_dir(self.cache) / "layers"

    def dependencies(self) -> Path:
        """The folder holding ``python/`` with the third-party part, built now if needed."""
        folder = self.cache_dir()
        built = folder / f"deps-{self.dependencies_key()}"
        if (built / "python").is_dir():
            return built
        with cache.locked(folder / ".lock"):
            if not (built / "python").is_dir():
                self._build_dependencies(built)
                cache.prune(folder, "deps-*", keep=built)
        return built

    def write(self, directory: Path) -> None:
        """Fill ``directory`` with the layer: ``python/`` holding the dependencies and pail."""
        cache.copy_tree(self.dependencies(), directory)
        site = directory / "python"
        staged = Path(tempfile.mkdtemp(prefix="pail-layer-", dir=directory))
        try:
            for relative, path in self.pail.files():
                destination = staged / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, destination)
            self._write_metadata(staged)
            python = self.bytecode_python
            if python is not None:
                bytecode.compile_tree(staged, self.target, python)
            cache.copy_tree(staged, site)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    def _write_metadata(self, site: Path) -> None:
        """The installed distribution's metadata, so ``importlib.metadata`` sees pail in the layer."""
        info = site / f"{DISTRIBUTION}-{self.version}.dist-info"
        info.mkdir()
        metadata = importlib.metadata.distribution(DISTRIBUTION).read_text("METADATA")
        (info / "METADATA").write_text(
            metadata or f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {self.version}\n"
        )
        (info / "INSTALLER").write_text("pail-cdk\n")
        (info / "RECORD").write_text("")
        (info / "top_level.txt").write_text(f"{PACKAGE}\n")

    def _build_dependencies(self, built: Path) -> None:
        built.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="pail-deps-", dir=built.parent) as tmp:
            staged = Path(tmp) / "layer"
            site = staged / "python"
            wheels.install(
                self.requirements,
                site,
                self.target,
                wheels=wheels.wheelhouse(self.wheelhouse),
                cache=self.cache_dir(),
            )
            shutil.rmtree(site / "bin", ignore_errors=True)
            python = self.bytecode_python
            if python is not None:
                bytecode.compile_tree(site, self.target, python)
            staged.rename(built)


def _check_imported_pail(pail: InstalledPail) -> None:
    """The ``pail`` that is imported must be the installed distribution's, or the layer lies."""
    import pail as imported

    location = Path(imported.__file__ or "").resolve().parent
    if location != pail.package_dir:
        raise LayerBuildError(
            f"the imported pail ({location}) is not the installed {DISTRIBUTION}'s "
            f"({pail.package_dir}); run the CDK app in the environment where {DISTRIBUTION} "
            "is installed, without PYTHONPATH pointing at another copy"
        )


@jsii.implements(ILocalBundling)
class LocalPipBundling:
    """CDK local bundling that writes the pail runtime layer, no Docker.

    It always succeeds or raises, so CDK never falls back to a container.
    """

    def __init__(self, bundle: RuntimeBundle) -> None:
        self.bundle = bundle

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_options: Any) -> bool:
        """Fill ``output_dir`` with the layer content."""
        self.bundle.write(Path(output_dir))
        return True


def runtime_layer_code(bundle: RuntimeBundle) -> lambda_.Code:
    """An asset holding ``bundle``, bundled locally; its hash is the bundle's key.

    The dependencies are built (or found in the cache) first, so a failure is
    this library's one-line error rather than one from inside CDK's bundling.
    """
    bundle.dependencies()
    return lambda_.Code.from_asset(
        str(bundle.pail.package_dir),
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
    cache_dir: str | os.PathLike[str] | None = None,
    wheelhouse: str | os.PathLike[str] | None = None,
) -> lambda_.ILayerVersion:
    """The stack's one layer holding the pail runtime (and Powertools), for ``architecture``.

    Every pail function of a stack with the same architecture shares it.
    ``cache_dir`` and ``wheelhouse`` override ``PAIL_CDK_CACHE`` and ``PAIL_WHEELHOUSE``.
    """
    arch = architecture_name(architecture)
    stack = Stack.of(scope)
    layer_id = f"PailRuntimeLayer-{arch}" + ("" if include_powertools else "-nopowertools")
    existing = stack.node.try_find_child(layer_id)
    if isinstance(existing, lambda_.LayerVersion):
        return existing
    bundle = RuntimeBundle(
        architecture=arch,
        include_powertools=include_powertools,
        cache=None if cache_dir is None else os.fspath(cache_dir),
        wheelhouse=None if wheelhouse is None else os.fspath(wheelhouse),
    )
    extra = " and Powertools" if include_powertools else ""
    layer = lambda_.LayerVersion(
        stack,
        layer_id,
        code=runtime_layer_code(bundle),
        compatible_runtimes=[LAMBDA_RUNTIME],
        compatible_architectures=[architecture],
        description=f"pail {bundle.version} runtime{extra} for Python {PYTHON_VERSION} on {arch}",
    )
    if bundle.bytecode_python is None:
        Annotations.of(layer).add_warning_v2(
            "pail:NoBytecode", NO_BYTECODE_WARNING.format(version=PYTHON_VERSION)
        )
    return layer


def public_powertools_layer(
    scope: Construct, *, architecture: lambda_.Architecture = lambda_.Architecture.ARM_64
) -> lambda_.ILayerVersion:
    """The public Powertools layer, its ARN resolved from SSM at deploy time (no lookup at synth).

    Use it with ``runtime_layer(include_powertools=False)``.
    """
    arch = architecture_name(architecture)
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
    cache_dir: str | os.PathLike[str] | None = None,
    wheelhouse: str | os.PathLike[str] | None = None,
) -> list[lambda_.ILayerVersion]:
    """The layers a pail function needs: the runtime, with Powertools bundled or public."""
    layers = [
        runtime_layer(
            scope,
            architecture=architecture,
            include_powertools=not public_powertools,
            cache_dir=cache_dir,
            wheelhouse=wheelhouse,
        )
    ]
    if public_powertools:
        layers.append(public_powertools_layer(scope, architecture=architecture))
    return layers
