"""Reading IAM statements out of a synthesised template, in a form tests can compare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pail_cdk.nag import render_for_nag


@dataclass(frozen=True)
class Statement:
    """One Allow statement: sorted actions, sorted rendered resources, its condition."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    condition: Any = None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def render(value: Any) -> str:
    rendered = render_for_nag(value)
    assert rendered is not None, f"cannot render {value!r}"
    return str(rendered)


def logical_id(template: dict[str, Any], kind: str, prefix: str) -> str:
    """The one logical id of type ``kind`` that starts with ``prefix``."""
    found = [
        name
        for name, res in template["Resources"].items()
        if res["Type"] == kind and name.startswith(prefix)
    ]
    assert len(found) == 1, f"expected one {kind} named {prefix}*, found {found}"
    return str(found[0])


def statements(template: dict[str, Any], role_prefix: str) -> set[Statement]:
    """Every statement of every policy attached to the role whose logical id starts with ``role_prefix``."""
    role = logical_id(template, "AWS::IAM::Role", role_prefix)
    found: set[Statement] = set()
    for res in template["Resources"].values():
        if res["Type"] != "AWS::IAM::Policy":
            continue
        if {"Ref": role} not in res["Properties"].get("Roles", []):
            continue
        for raw in res["Properties"]["PolicyDocument"]["Statement"]:
            assert raw["Effect"] == "Allow"
            found.add(
                Statement(
                    actions=tuple(sorted(_as_list(raw["Action"]))),
                    resources=tuple(sorted(render(r) for r in _as_list(raw["Resource"]))),
                    condition=_freeze(raw.get("Condition")),
                )
            )
    return found


def s3_statements(template: dict[str, Any], role_prefix: str) -> set[Statement]:
    """The role's statements that are about S3."""
    return {
        s
        for s in statements(template, role_prefix)
        if all(action.startswith("s3:") for action in s.actions)
    }


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def condition(prefixes: list[str]) -> Any:
    """The frozen ``s3:prefix`` listing condition for ``prefixes``."""
    return _freeze({"StringLike": {"s3:prefix": prefixes}})
