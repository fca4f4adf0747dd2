"""The examples in the docstrings of the CLI and demo modules (and the local server's) run as written."""

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
    "pail.bounds",
    "pail.serving",
    "pail.errors",
    "pail.cli.local",
    "pail.local",
    "pail.demo.jobs",
    "pail.demo.display",
]


@pytest.mark.parametrize("name", MODULES)
def test_given_module_docstring_examples_when_run_then_they_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))

    assert result.attempted > 0
    assert result.failed == 0
