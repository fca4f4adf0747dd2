"""The platform a Lambda layer is built for: CPU architecture and Python version."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_lambda as lambda_

PYTHON_VERSION = "3.12"
"""The Python version of every pail Lambda function and of the wheels in its layer."""

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_12
"""The Lambda runtime matching ``PYTHON_VERSION``."""

_PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
_MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}


def architecture_name(architecture: lambda_.Architecture) -> str:
    """The Lambda name of ``architecture`` (``arm64`` or ``x86_64``); others are refused."""
    name = architecture.name
    if name not in _PLATFORMS:
        raise ValueError(f"unsupported Lambda architecture {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class Target:
    """Where a layer runs: ``architecture`` (``arm64``/``x86_64``) and ``python_version``.

    >>> Target("x86_64").platform
    'manylinux2014_x86_64'
    >>> Target("arm64").markers()["platform_machine"]
    'aarch64'
    """

    architecture: str = "arm64"
    python_version: str = PYTHON_VERSION

    def __post_init__(self) -> None:
        if self.architecture not in _PLATFORMS:
            raise ValueError(f"unsupported Lambda architecture {self.architecture!r}")
        major, _, minor = self.python_version.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"python_version must look like '3.12', got {self.python_version!r}")

    @property
    def platform(self) -> str:
        """The pip platform tag of the wheels to install."""
        return _PLATFORMS[self.architecture]

    @property
    def cache_tag(self) -> str:
        """The ``__pycache__`` tag of bytecode for this Python (``cpython-312``)."""
        return "cpython-" + self.python_version.replace(".", "")

    def markers(self) -> dict[str, str]:
        """The PEP 508 marker environment of the Lambda runtime, to evaluate requirements."""
        return {
            "implementation_name": "cpython",
            "implementation_version": f"{self.python_version}.0",
            "os_name": "posix",
            "platform_machine": _MACHINES[self.architecture],
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": f"{self.python_version}.0",
            "python_version": self.python_version,
            "sys_platform": "linux",
        }
