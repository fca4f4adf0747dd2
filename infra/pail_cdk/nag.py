"""cdk-nag acknowledgements, kept next to the resources they concern.

cdk-nag v3 reads CDK's own ``Validations.of(construct).acknowledge(...)``
records. Each helper here acknowledges one finding on one construct (and its
children) and always states why, so the audit trail in the cloud assembly
(``aws:cdk:acknowledged-rules`` metadata) explains itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

IAM4 = "AwsSolutions-IAM4"
IAM5 = "AwsSolutions-IAM5"
L1 = "AwsSolutions-L1"
S1 = "AwsSolutions-S1"
ECS2 = "AwsSolutions-ECS2"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge the finding ``rule`` on ``scope`` and its children, for ``reason``."""
    if len(reason.split()) < 5:
        raise ValueError(f"give {rule} a real reason, not {reason!r}")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge_wildcard_resources(scope: IConstruct, arns: Iterable[str], reason: str) -> None:
    """Acknowledge ``AwsSolutions-IAM5`` for each of ``arns`` (which end in a wildcard).

    cdk-nag names each finding after the resource as it renders it
    (``<LogicalId.Arn>/queue/*``); this renders the ARN the same way. An ARN
    it cannot render (a cross-stack reference) is left for the caller.
    """
    stack = Stack.of(scope)
    for arn in arns:
        rendered = render_for_nag(stack.resolve(arn))
        if rendered is not None and "*" in rendered:
            acknowledge(scope, f"{IAM5}[Resource::{rendered}]", reason)


def render_for_nag(value: Any) -> str | None:
    """Render a resolved CloudFormation value the way cdk-nag names resources in findings."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and isinstance(argument, str):
            return f"<{argument}>"
        if function == "Fn::GetAtt" and isinstance(argument, list) and len(argument) == 2:
            return f"<{argument[0]}.{argument[1]}>"
        if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            separator, parts = argument
            rendered = [render_for_nag(part) for part in parts]
            if all(part is not None for part in rendered):
                return str(separator).join(part for part in rendered if part is not None)
            return None
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return None
