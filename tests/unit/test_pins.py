"""The development environment is the pinned one (``scripts/lock``).

``scripts/_bootstrap.sh`` installs under the pins of pyproject.toml's
``[tool.uv] constraint-dependencies``, with uv or with pip. A dependency added
without ``scripts/lock`` would install unpinned, at whatever version the index
has that day: this fails then, naming it.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The project itself: scripts/lock pins what it depends on, not it.
_UNPINNED = {"pailq"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins: dict[str, str] = {}
    for pin in project["tool"]["uv"]["constraint-dependencies"]:
        name, _, version = pin.partition("==")
        pins[_canonical(name)] = version
    return pins


def test_given_the_pins_when_read_then_each_is_one_exact_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = project["tool"]["uv"]["constraint-dependencies"]

    assert pins == sorted(pins), "scripts/lock writes the pins sorted"
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", pin) for pin in pins), pins


def test_given_this_environment_when_compared_with_the_pins_then_every_package_is_pinned() -> None:
    pins = _pins()
    installed = {
        _canonical(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }
    unpinned = sorted(set(installed) - set(pins) - _UNPINNED)
    differ = {
        name: (installed[name], pins[name])
        for name in set(installed) & set(pins)
        if installed[name] != pins[name]
    }

    assert not unpinned, f"installed but not pinned (run scripts/lock): {unpinned}"
    assert not differ, f"installed version differs from its pin (installed, pinned): {differ}"
