"""The pins of scripts/lock: pyproject.toml's [tool.uv] constraint-dependencies, from a uv.lock.

python scripts/_pins.py write PYPROJECT UV_LOCK   pin every locked package (not the project)
python scripts/_pins.py check PYPROJECT UV_LOCK   exit 1 naming the pins that differ
python scripts/_pins.py strip PYPROJECT           remove the pins (to resolve afresh)
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

HEADER = (
    "[tool.uv]\n"
    "# Written by scripts/lock: the exact version of every package a development\n"
    "# environment installs (uv sync, scripts/_bootstrap.sh with uv or pip, CI).\n"
)
BLOCK = re.compile(r"\[tool\.uv\]\n(?:#[^\n]*\n)*constraint-dependencies = \[\n(?:[^\]]*\n)?\]\n")


def locked(lock: Path) -> list[str]:
    """``name==version`` for every package of ``lock`` that comes from an index."""
    packages = tomllib.loads(lock.read_text())["package"]
    return sorted(
        f"{package['name']}=={package['version']}"
        for package in packages
        if "registry" in package.get("source", {})
    )


def block(pins: list[str]) -> str:
    lines = "".join(f'    "{pin}",\n' for pin in pins)
    return f"{HEADER}constraint-dependencies = [\n{lines}]\n"


def current(pyproject: Path) -> list[str]:
    tool = tomllib.loads(pyproject.read_text()).get("tool", {}).get("uv", {})
    return list(tool.get("constraint-dependencies", []))


def write(pyproject: Path, lock: Path) -> None:
    text = pyproject.read_text()
    new = block(locked(lock))
    text = BLOCK.sub(new, text) if BLOCK.search(text) else text.rstrip("\n") + "\n\n" + new
    pyproject.write_text(text)
    print(f"pinned {len(locked(lock))} packages in {pyproject.name}")


def strip(pyproject: Path) -> None:
    pyproject.write_text(BLOCK.sub("", pyproject.read_text()))


def check(pyproject: Path, lock: Path) -> int:
    want, have = set(locked(lock)), set(current(pyproject))
    if want == have:
        print(f"the {len(have)} pins match the resolution")
        return 0
    for pin in sorted(want - have):
        print(f"missing pin: {pin}")
    for pin in sorted(have - want):
        print(f"stale pin: {pin}")
    print("run scripts/lock and commit pyproject.toml")
    return 1


def main(argv: list[str]) -> int:
    command, *paths = argv
    if command == "write":
        write(Path(paths[0]), Path(paths[1]))
    elif command == "check":
        return check(Path(paths[0]), Path(paths[1]))
    elif command == "strip":
        strip(Path(paths[0]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
