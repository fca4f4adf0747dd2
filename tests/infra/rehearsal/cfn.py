"""Resolving a synthesised template's references to the names a deployment would give them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"

_PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
}


class UnresolvableError(ValueError):
    """The template uses a reference the rehearsal cannot give a value (it must not guess)."""


@dataclass
class Deployment:
    """The physical names of a stack's resources, as CloudFormation would choose them."""

    template: dict[str, Any]
    stack: str
    bucket_names: dict[str, str] = field(default_factory=dict)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self.template["Resources"]
        return {name: res for name, res in found.items() if res["Type"] == kind}

    def physical_name(self, logical_id: str) -> str:
        resource = self.template["Resources"].get(logical_id)
        if resource is None:
            raise UnresolvableError(f"no resource {logical_id}")
        kind = resource["Type"]
        if kind == "AWS::S3::Bucket":
            return self.bucket_names[logical_id]
        if kind in {"AWS::Lambda::Function", "AWS::IAM::Role", "AWS::Logs::LogGroup"}:
            return f"{self.stack}-{logical_id}"[:64]
        if kind == "AWS::ECS::Cluster":
            return f"{self.stack}-{logical_id}"
        if kind == "AWS::ECS::Service":  # its Ref is its ARN
            cluster = self.resolve(resource["Properties"]["Cluster"])
            return f"arn:{PARTITION}:ecs:{REGION}:{ACCOUNT}:service/{cluster}/{self.stack}-{logical_id}"
        if kind == "AWS::Lambda::LayerVersion":
            return self.arn(logical_id, "")
        raise UnresolvableError(f"Ref to a {kind} ({logical_id})")

    def arn(self, logical_id: str, attribute: str) -> str:
        kind = self.template["Resources"][logical_id]["Type"]
        name = self.physical_name(logical_id) if kind != "AWS::Lambda::LayerVersion" else logical_id
        region, account = REGION, ACCOUNT
        if kind == "AWS::S3::Bucket":
            return f"arn:{PARTITION}:s3:::{name}"
        if kind == "AWS::Lambda::Function":
            return f"arn:{PARTITION}:lambda:{region}:{account}:function:{name}"
        if kind == "AWS::Lambda::LayerVersion":
            return f"arn:{PARTITION}:lambda:{region}:{account}:layer:{name}:1"
        if kind == "AWS::IAM::Role":
            return f"arn:{PARTITION}:iam::{account}:role/{name}"
        if kind == "AWS::Logs::LogGroup":
            return f"arn:{PARTITION}:logs:{region}:{account}:log-group:{name}:*"
        if kind == "AWS::ECS::Cluster":
            return f"arn:{PARTITION}:ecs:{region}:{account}:cluster/{name}"
        raise UnresolvableError(f"GetAtt {logical_id}.{attribute} of a {kind}")

    def resolve(self, value: Any) -> Any:
        """``value`` with every ``Ref``, ``Fn::GetAtt`` and ``Fn::Join`` replaced by its value."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {key: self.resolve(item) for key, item in value.items()}
        ((function, argument),) = value.items()
        if function == "Ref":
            return _PSEUDO.get(argument) or self.physical_name(argument)
        if function == "Fn::GetAtt":
            logical_id, attribute = argument
            if attribute == "Arn":
                return self.arn(logical_id, attribute)
            kind = self.template["Resources"][logical_id]["Type"]
            if (kind, attribute) == ("AWS::ECS::Service", "Name"):
                return str(self.physical_name(logical_id)).rpartition("/")[2]
            raise UnresolvableError(f"GetAtt {logical_id}.{attribute}")
        if function == "Fn::Join":
            separator, parts = argument
            return str(separator).join(str(self.resolve(part)) for part in parts)
        if function.startswith("Fn::"):
            raise UnresolvableError(f"{function} is not resolved by the rehearsal")
        return {function: self.resolve(argument)}
