"""Each role's IAM policy from the template, evaluated the way IAM does for the requests pail makes.

Only identity policies are modelled (the roles' inline policies and
``AWS::IAM::Policy`` resources attached to them): an explicit Deny wins, else
an Allow whose action, resource and conditions all match, else the request is
denied. Wildcards are IAM's (``*`` any run of characters, ``?`` one).
Conditions: ``StringEquals``/``StringLike`` (and their ``ForAnyValue``-less
forms only) on keys the request supplies; a condition on a key the request
lacks does not match, as in IAM. A managed policy is refused, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .cfn import Deployment

_OPERATORS = {"StringEquals", "StringLike", "ArnEquals", "ArnLike"}


@lru_cache(maxsize=1024)
def _pattern(text: str, case_sensitive: bool) -> re.Pattern[str]:
    body = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in text
    )
    return re.compile(f"^{body}$", 0 if case_sensitive else re.IGNORECASE)


def matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM wildcard match: ``*`` any characters (``/`` included), ``?`` one.

    >>> matches("arn:aws:s3:::b/queue/*", "arn:aws:s3:::b/queue/01J")
    True
    >>> matches("s3:Get*", "S3:GETOBJECT", case_sensitive=False)
    True
    """
    return bool(_pattern(pattern, case_sensitive).match(value))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: Mapping[str, Mapping[str, Any]]

    def applies(self, action: str, resource: str, context: Mapping[str, str]) -> bool:
        if not any(matches(a, action, case_sensitive=False) for a in self.actions):
            return False
        if not any(matches(r, resource) for r in self.resources):
            return False
        return all(
            _condition(operator, key, values, context)
            for operator, entries in self.conditions.items()
            for key, values in entries.items()
        )


def _condition(operator: str, key: str, values: Any, context: Mapping[str, str]) -> bool:
    if operator not in _OPERATORS:
        raise ValueError(f"condition operator {operator} is not modelled by the rehearsal")
    if key not in context:
        return False
    actual = context[key]
    wanted = [str(v) for v in _as_list(values)]
    if operator.endswith("Equals"):
        return actual in wanted
    return any(matches(pattern, actual) for pattern in wanted)


@dataclass(frozen=True)
class Policy:
    """The statements that apply to one role."""

    role: str
    statements: tuple[Statement, ...]

    @classmethod
    def of_role(cls, deployment: Deployment, role: str) -> Policy:
        """Every statement attached to the role whose logical id is ``role``."""
        resource = deployment.template["Resources"][role]
        if resource["Properties"].get("ManagedPolicyArns"):
            raise ValueError(f"{role} has managed policies; the rehearsal does not model them")
        documents = [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
        for policy in deployment.resources("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"].get("Roles", []):
                documents.append(policy["Properties"]["PolicyDocument"])
        statements = []
        for document in documents:
            for raw in document["Statement"]:
                statements.append(
                    Statement(
                        effect=raw["Effect"],
                        actions=tuple(_as_list(raw["Action"])),
                        resources=tuple(
                            str(deployment.resolve(r)) for r in _as_list(raw["Resource"])
                        ),
                        conditions=deployment.resolve(raw.get("Condition", {})),
                    )
                )
        return cls(role=role, statements=tuple(statements))

    def allows(self, action: str, resource: str, context: Mapping[str, str] | None = None) -> bool:
        """Whether IAM would allow ``action`` on ``resource`` with the request's ``context``."""
        context = context or {}
        applicable = [s for s in self.statements if s.applies(action, resource, context)]
        if any(s.effect == "Deny" for s in applicable):
            return False
        return any(s.effect == "Allow" for s in applicable)

    def without(self, action: str) -> Policy:
        """This policy with ``action`` taken out of every statement (to show a denial)."""
        kept = []
        for statement in self.statements:
            actions = tuple(a for a in statement.actions if a != action)
            if actions:
                kept.append(
                    Statement(statement.effect, actions, statement.resources, statement.conditions)
                )
        return Policy(self.role, tuple(kept))

    def granted(self) -> dict[str, tuple[str, ...]]:
        """Allowed actions -> the resources they are allowed on (for the report)."""
        found: dict[str, list[str]] = {}
        for statement in self.statements:
            if statement.effect != "Allow":
                continue
            for action in statement.actions:
                found.setdefault(action, []).extend(statement.resources)
        return {action: tuple(sorted(set(arns))) for action, arns in sorted(found.items())}
