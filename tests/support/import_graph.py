"""The static import graph of a package: which of its modules each module imports.

Every ``import`` counts, at module level or inside a function (a lazy import
is still an arrow), so a test can check the direction of imports without
importing anything: ``import_graph(ROOT / "runtime", "pail")["pail.queue"]`` is the set
of ``pail`` modules that ``pail.queue`` imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``{module: {modules of package it imports}}`` for every module under ``root/package``."""
    files = _modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(_known(alias.name, files) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, here)
                deps.update(_known(f"{base}.{alias.name}", files) for alias in node.names)
        graph[name] = deps - {"", name}
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """The import cycles: strongly connected sets of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


def _modules(root: Path, package: str) -> dict[str, Path]:
    files = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _absolute(node: ast.ImportFrom, here: str) -> str:
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _known(name: str, files: Mapping[str, Path]) -> str:
    """The longest prefix of ``name`` that is a module of the package ("" for none)."""
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name
