"""mypy checks every aws_cdk module pail imports: the skip of the others must not hide one.

``pyproject.toml`` skips the aws_cdk services pail never touches (a cold mypy
spent most of its time on them) and lists the ones it uses. A module imported
here but missing from that list would be seen as ``Any``: its misuse would pass.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("runtime", "infra", "bench", "examples", "tests")


def _overrides(follow_imports: str) -> list[list[str]]:
    """The module lists of pyproject.toml's mypy overrides with this ``follow_imports``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    overrides = project["tool"]["mypy"]["overrides"]
    return [o["module"] for o in overrides if o.get("follow_imports") == follow_imports]


def _checked_cdk_modules() -> set[str]:
    return {name for modules in _overrides("normal") for name in modules}


def _imported_cdk_modules() -> dict[str, Path]:
    """Every ``aws_cdk`` module the checked code imports, with one file that does."""
    found: dict[str, Path] = {}
    for folder in CHECKED:
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" in path.parts or "cdk.out" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                    if node.module == "aws_cdk":  # ``from aws_cdk import aws_s3 as s3``
                        names += [f"aws_cdk.{a.name}" for a in node.names if a.name[0].islower()]
                for name in names:
                    if name == "aws_cdk" or name.startswith("aws_cdk."):
                        found.setdefault(name, path)
    return found


def test_given_the_code_then_every_aws_cdk_module_it_imports_is_type_checked() -> None:
    imported = _imported_cdk_modules()
    checked = _checked_cdk_modules()

    assert {"aws_cdk", "aws_cdk.aws_lambda", "aws_cdk.assertions"} <= set(imported)
    missing = {
        name: str(path.relative_to(ROOT)) for name, path in imported.items() if name not in checked
    }
    assert not missing, (
        f"aws_cdk modules imported but skipped by mypy: {missing}; add each (and its "
        "aws_cdk.interfaces.<service>) to the follow_imports = 'normal' list in pyproject.toml"
    )


def test_given_the_skip_then_it_covers_the_services_and_spares_the_checked_ones() -> None:
    assert _overrides("skip") == [["aws_cdk.*"]]
    checked = _checked_cdk_modules()
    services = [name for name in checked if name.startswith("aws_cdk.aws_")]
    assert "aws_cdk.interfaces" in checked and services
    for name in services:
        service = name.removeprefix("aws_cdk.")
        # A service is checked with its base interfaces (where it has any), or values of
        # its types would pass anywhere: a class with an ``Any`` base matches every type.
        if importlib.util.find_spec(f"aws_cdk.interfaces.{service}") is not None:
            assert f"aws_cdk.interfaces.{service}" in checked, service
