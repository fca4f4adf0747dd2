"""The examples in the docstrings of the operator modules run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "pail.operate.objects",
    "pail.operate.snapshot",
    "pail.operate.jobs",
    "pail.operate.queues",
    "pail.operate.purge",
    "pail.operate.text",
    "pail.doctor",
    "pail.dashboard.chart",
    "pail.dashboard.model",
]


@pytest.mark.parametrize("name", MODULES)
def test_given_module_docstring_examples_when_run_then_they_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))

    assert result.attempted > 0
    assert result.failed == 0
