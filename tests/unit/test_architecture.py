"""The direction of imports, as docs/architecture.md draws it, read from the source.

Each rule is a set of modules a layer may import; a test fails naming the
module and the import that breaks it, so a shortcut across layers is caught
when it is written, not when the layers have grown into each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pail
from tests.support.import_graph import imports

PACKAGE = Path(pail.__file__).parent

LEAVES = {"pail.errors", "pail.clock", "pail.keys"}
"""Modules that import nothing of pail's."""

VALUES = LEAVES | {"pail.ids", "pail.bounds", "pail.jsonsafe", "pail.codec", "pail.tags"}
"""What a job is made of: ids, keys, bounds, tags, the codec and its total JSON decoder."""

PROTOCOL_MAY_IMPORT = VALUES | {"pail.protocol", "pail.store"}
STORE_MAY_IMPORT = {"pail.store", "pail.errors", "pail.config"}
AWS_SDK = {"boto3", "botocore"}
AWS_SDK_OUTSIDE_STORE = {"pail.aws.reaper"}
"""The reaper's self-heal invokes the worker Lambda: the one client not for S3."""


IMPORTS = list(imports(PACKAGE.parent, "pail"))


def _within(module: str, allowed: set[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in allowed)


def _breaches(layer: str, allowed: set[str]) -> list[str]:
    return [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in IMPORTS
        if _within(i.importer, {layer})
        and i.target.startswith("pail")
        and not _within(i.target, allowed | {layer})
    ]


def test_the_import_graph_is_read() -> None:
    # A parser that found nothing would pass every rule below.
    assert any(
        i.importer == "pail.protocol.claim" and i.target == "pail.store.base" for i in IMPORTS
    )
    assert any(i.importer == "pail.aws.reaper" and i.target == "boto3" for i in IMPORTS)


def test_protocol_imports_only_values_store_and_itself() -> None:
    assert _breaches("pail.protocol", PROTOCOL_MAY_IMPORT) == []


def test_store_imports_only_errors_and_settings() -> None:
    assert _breaches("pail.store", STORE_MAY_IMPORT) == []


@pytest.mark.parametrize("leaf", sorted(VALUES))
def test_value_modules_import_no_layer_above_them(leaf: str) -> None:
    allowed = set() if leaf in LEAVES else VALUES
    assert _breaches(leaf, allowed) == []


def test_only_the_store_imports_the_aws_sdk() -> None:
    breaches = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in IMPORTS
        if i.target.split(".")[0] in AWS_SDK
        and not _within(i.importer, {"pail.store"} | AWS_SDK_OUTSIDE_STORE)
    ]
    assert breaches == []


def test_nothing_below_the_cli_imports_it_at_import_time() -> None:
    # python -m pail.runner hands its arguments to the CLI inside main(): a
    # deferred import, which the Lambda layer (it ships no CLI) never runs.
    breaches = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in IMPORTS
        if i.top_level and _within(i.target, {"pail.cli"}) and not _within(i.importer, {"pail.cli"})
    ]
    assert breaches == []
