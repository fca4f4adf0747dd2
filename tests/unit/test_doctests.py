"""The examples in the docstrings run as written: the CLI, the demo, the local server, the
operator's reads and actions, and the tests' own support modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "pail.output",
    "pail.cli.context",
    "pail.cli.exit_codes",
    "pail.cli.jobs",
    "pail.cli.params",
    "pail.cli.worker_log",
    "pail.config",
    "pail.aws.named",
    "pail.bounds",
    "pail.serving",
    "pail.errors",
    "pail.cli.local",
    "pail.local",
    "pail.demo.jobs",
    "pail.demo.display",
    "pail.store.counting",
    "pail.operate.objects",
    "pail.operate.snapshot",
    "pail.operate.jobs",
    "pail.operate.queues",
    "pail.operate.purge",
    "pail.operate.text",
    "pail.doctor",
    "pail.dashboard.chart",
    "pail.dashboard.model",
    "tests.support.clocks",
    "tests.support.lambdas",
    "tests.support.relay",
    "tests.simulation.seeds",
    "tests.simulation.sweep",
]


@pytest.mark.parametrize("name", MODULES)
def test_given_module_docstring_examples_when_run_then_they_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))

    assert result.attempted > 0
    assert result.failed == 0
