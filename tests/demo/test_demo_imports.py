"""The demo is a package the CLI imports, never the other way round, and it is in no import cycle."""

from __future__ import annotations

from tests.support.command import ROOT
from tests.support.import_graph import cycles, import_graph

GRAPH = import_graph(ROOT / "runtime", "pail")
DEMO = {name for name in GRAPH if name == "pail.demo" or name.startswith("pail.demo.")}


def test_given_the_demo_package_when_its_imports_are_read_then_none_reaches_the_cli() -> None:
    reaching_cli = {
        module: sorted(dep for dep in GRAPH[module] if dep.split(".")[:2] == ["pail", "cli"])
        for module in DEMO
    }

    assert {"pail.demo.run", "pail.demo.jobs", "pail.demo.fleet"} <= DEMO
    assert {module: deps for module, deps in reaching_cli.items() if deps} == {}
    assert "pail.demo.run" in GRAPH["pail.cli.local"]


def test_given_the_runtime_when_its_imports_are_read_then_no_cycle_holds_a_demo_module() -> None:
    assert [cycle for cycle in cycles(GRAPH) if cycle & DEMO] == []


def test_given_a_cycle_when_the_graph_is_read_then_it_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [{"a", "b", "c"}]
