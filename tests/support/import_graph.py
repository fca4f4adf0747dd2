"""The static imports of a package, read from its source: who imports what, where, and when.

Every ``import`` counts, at module level or inside a function (a lazy import
is still an arrow), so a test can check the direction of imports without
importing anything. ``imports`` lists each one (``Import``: importer, target,
line, whether it runs at import time); ``import_graph`` folds them into
``{module: modules of the package it imports}``, and ``cycles`` finds the
circles in such a graph::

    import_graph(ROOT / "runtime", "pail")["pail.queue"]  # the pail modules pail.queue imports
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Import:
    """One imported module: ``importer`` imports ``target`` at ``line``.

    ``target`` is the longest prefix of the imported name that is a module of
    the package (``from pail import codec`` is ``pail.codec``, ``from
    pail.store.base import Store`` is ``pail.store.base``, ``from pail import
    Pail`` is ``pail``); a module from outside the package keeps its name
    (``botocore.exceptions``). ``top_level``: it runs when the importer is
    imported (module level, or under a module-level ``if`` such as
    ``TYPE_CHECKING``), not later inside a function.
    """

    importer: str
    target: str
    line: int
    top_level: bool


def imports(root: Path, package: str) -> Iterator[Import]:
    """Every import in every module under ``root/package``, in file and then tree order."""
    files = _modules(root, package)
    for name, path in sorted(files.items(), key=lambda item: item[1]):
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        top = set(map(id, tree.body))
        for parent in ast.walk(tree):
            for node in ast.iter_child_nodes(parent):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                top_level = id(node) in top or (parent in tree.body and isinstance(parent, ast.If))
                for target in _targets(node, here, files):
                    yield Import(name, target, node.lineno, top_level)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``{module: {modules of package it imports}}`` for every module under ``root/package``."""
    graph: dict[str, set[str]] = {name: set() for name in _modules(root, package)}
    for found in imports(root, package):
        if found.target in graph and found.target != found.importer:
            graph[found.importer].add(found.target)
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


def _targets(
    node: ast.Import | ast.ImportFrom, here: str, files: Mapping[str, Path]
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _absolute(node, here)
        names = [f"{base}.{alias.name}" for alias in node.names]
    for name in names:
        # A name from outside the package is the module itself (``from x import y``: ``x``).
        yield _known(name, files) or (
            name if isinstance(node, ast.Import) else _absolute(node, here)
        )


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
