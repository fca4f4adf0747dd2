"""The installed pail: the ``pailq`` distribution the synth runs with, as the layer ships it.

The layer holds the pail that is installed where ``cdk synth`` runs, never a
copy of some source tree: its version and files come from
``importlib.metadata``, its third-party requirements from the distribution's
``Requires-Dist``, evaluated for the Lambda platform.

Two things the Lambda never imports stay out:

* the ``pail`` command's stack (``click``, ``rich`` and with it ``pygments``),
  and the modules that need it: the CLI, the demo and its terminal output;
* the embedded local S3 server (``pail.local``, which needs the ``local`` extra).
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pail_cdk.errors import LayerBuildError
from pail_cdk.target import Target

DISTRIBUTION = "pailq"
"""The distribution that holds the runtime package ``pail`` (and ``pail_cdk``)."""

PACKAGE = "pail"
"""The runtime's import package: the only package of the distribution the layer ships."""

LAMBDA_EXTRA = "lambda"
"""The extra that holds the Lambda-only dependencies (Powertools, the X-Ray SDK)."""

CLI_REQUIREMENTS = frozenset({"click", "rich"})
"""Requirements only the ``pail`` command imports; the layer leaves them out."""

CLI_ONLY_FILES = (
    "pail/cli/*",
    "pail/demo/*",
    "pail/runner/__main__.py",
    "pail/output.py",
    "pail/local.py",
)
"""Modules of ``pail`` that import the command's stack or the local server; left out of the layer."""

_SKIP_PARTS = frozenset({"__pycache__"})


@dataclass(frozen=True, slots=True)
class InstalledPail:
    """The installed ``pailq``: its version, the files of ``pail``, and its requirements."""

    version: str
    package_dir: Path
    requires: tuple[str, ...]

    @classmethod
    def find(cls) -> InstalledPail:
        """The ``pailq`` distribution of this environment; a clear error if it is missing."""
        try:
            dist = importlib.metadata.distribution(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            raise LayerBuildError(
                f"the {DISTRIBUTION} distribution is not installed here; "
                f"pip install '{DISTRIBUTION}[cdk]' in the environment that runs the CDK app"
            ) from None
        spec = importlib.util.find_spec(PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise LayerBuildError(f"{DISTRIBUTION} is installed but its package {PACKAGE!r} is not")
        (location,) = list(spec.submodule_search_locations)[:1]
        return cls(
            version=dist.version,
            package_dir=Path(location).resolve(),
            requires=tuple(dist.requires or ()),
        )

    def files(self, *, lambda_only: bool = True) -> list[tuple[PurePosixPath, Path]]:
        """``(path in site-packages, file)`` for each source file of ``pail``, sorted.

        ``lambda_only`` (the layer) leaves out the modules the Lambda never imports.
        """
        found: list[tuple[PurePosixPath, Path]] = []
        for path in sorted(self.package_dir.rglob("*")):
            relative = PurePosixPath(PACKAGE, *path.relative_to(self.package_dir).parts)
            if not path.is_file() or _SKIP_PARTS.intersection(relative.parts):
                continue
            if path.suffix == ".pyc" or (lambda_only and _cli_only(relative)):
                continue
            found.append((relative, path))
        return found

    def requirements(self, target: Target, *, extras: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The third-party requirements for ``target``, with ``extras``, less the CLI's, sorted.

        Markers are evaluated for the Lambda platform, not for this machine.
        """
        chosen: list[str] = []
        for text in self.requires:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == DISTRIBUTION:
                continue  # a self-reference between extras (pailq[infra] -> pailq[cdk])
            if canonicalize_name(requirement.name) in CLI_REQUIREMENTS:
                continue
            if not _applies(requirement.marker, target, extras):
                continue
            requirement.marker = None
            chosen.append(str(requirement))
        return tuple(sorted(chosen))


def _applies(marker: Marker | None, target: Target, extras: tuple[str, ...]) -> bool:
    if marker is None:
        return True
    environment = target.markers()
    return any(marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras))


def _cli_only(path: PurePosixPath) -> bool:
    return any(fnmatch.fnmatchcase(str(path), pattern) for pattern in CLI_ONLY_FILES)
