"""PailFargateWorker: the task definition's command and environment, and what starts it."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template

from pail import config
from pail.keys import QUEUE

from .conftest import Synthesis
from .helpers import Statement, logical_id, statements


def _container(synthesis: Synthesis, stack: str) -> dict[str, Any]:
    (task,) = synthesis.resources(stack, "AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    return dict(container)


def _environment(container: dict[str, Any]) -> dict[str, Any]:
    return {item["Name"]: item["Value"] for item in container["Environment"]}


def test_given_the_example_service_when_synthesised_then_tasks_run_work_with_the_queue_env(
    example: Synthesis, example_template: Template
) -> None:
    bucket = logical_id(example.templates["PailExample"], "AWS::S3::Bucket", "JobsBucket")
    container = _container(example, "PailExample")
    assert container["Command"] == ["pail", "work", "--handler", "report:run"]
    assert _environment(container) == {
        config.ENV_BUCKET: {"Ref": bucket},
        config.ENV_QUEUE: "exports",
        config.ENV_VISIBILITY_TIMEOUT: "30",
        config.ENV_MAX_RETRIES: "3",
        config.ENV_SHARDS: "1",
        config.ENV_HANDLER: "report:run",
        config.ENV_GRACE_PERIOD: "115",
        config.ENV_TASK_PROTECTION: "true",
        config.ENV_RECLAIM: "false",  # the scheduled reaper reclaims
    }
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    assert container["LogConfiguration"]["Options"]["awslogs-stream-prefix"] == "pail"
    assert container["StopTimeout"] == 120
    example_template.has_resource_properties(
        "AWS::ECS::TaskDefinition",
        {
            "Cpu": "256",
            "Memory": "512",
            "RequiresCompatibilities": ["FARGATE"],
            "RuntimePlatform": {"CpuArchitecture": "X86_64", "OperatingSystemFamily": "LINUX"},
        },
    )


def test_given_once_mode_when_synthesised_then_the_task_runs_work_once(
    variants: Synthesis,
) -> None:
    container = _container(variants, "Once")
    assert container["Command"] == ["pail", "work-once", "--handler", "report:run"]
    assert _environment(container)[config.ENV_QUEUE] == "exports"
    assert _environment(container)[config.ENV_TASK_PROTECTION] == "false"
    assert _environment(container)[config.ENV_RECLAIM] == "false"  # one LIST less per task
    template = variants.template("Once")
    template.resource_count_is("AWS::ECS::Service", 0)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)


def test_given_once_mode_when_synthesised_then_enqueue_and_schedule_start_a_fargate_task(
    variants: Synthesis,
) -> None:
    template = variants.templates["Once"]
    once = variants.template("Once")
    task = logical_id(template, "AWS::ECS::TaskDefinition", "TaskTaskDefinition")
    target = Match.object_like(
        {
            "EcsParameters": Match.object_like(
                {
                    "LaunchType": "FARGATE",
                    "TaskCount": 1,
                    "TaskDefinitionArn": {"Ref": task},
                    "NetworkConfiguration": {
                        "AwsVpcConfiguration": Match.object_like({"AssignPublicIp": "ENABLED"})
                    },
                }
            )
        }
    )
    once.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": Match.object_like(
                {"detail": Match.object_like({"object": {"key": [{"prefix": f"exports/{QUEUE}"}]}})}
            ),
            "Targets": [target],
        },
    )
    once.has_resource_properties(
        "AWS::Events::Rule", {"ScheduleExpression": "rate(5 minutes)", "Targets": [target]}
    )


def test_given_no_cluster_when_synthesised_then_a_nat_less_vpc_with_s3_endpoint_and_flow_logs(
    example_template: Template,
) -> None:
    example_template.resource_count_is("AWS::EC2::NatGateway", 0)
    example_template.resource_count_is("AWS::ECS::Cluster", 1)
    example_template.has_resource_properties(
        "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"}
    )
    example_template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "REJECT"})
    example_template.has_resource_properties(
        "AWS::ECS::Cluster",
        {"ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}]},
    )
    example_template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": "pail Fargate workers: no inbound traffic",
            "SecurityGroupIngress": Match.absent(),
        },
    )


def test_given_service_mode_when_synthesised_then_a_service_runs_work_and_no_rule_starts_tasks(
    variants: Synthesis,
) -> None:
    template = variants.template("Service")
    template.has_resource_properties(
        "AWS::ECS::Service",
        {
            "DesiredCount": 2,
            "LaunchType": "FARGATE",
            "DeploymentConfiguration": Match.object_like(
                {"DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}}
            ),
        },
    )
    container = _container(variants, "Service")
    assert container["Command"] == ["pail", "work", "--handler", "report:run"]
    assert container["Image"] == "example/pail-worker:1"
    environment = _environment(container)
    assert environment[config.ENV_MAX_JOBS] == "100"
    assert environment[config.ENV_TIME_BUDGET] == "3600"
    # Only the reaper's schedule: the service polls, nothing starts tasks.
    template.resource_count_is("AWS::Events::Rule", 1)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)


def _ecs_statements(template: dict[str, Any]) -> set[Statement]:
    (task,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ECS::TaskDefinition"]
    role = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    return {s for s in statements(template, role) if any(a.startswith("ecs:") for a in s.actions)}


def test_given_a_service_when_synthesised_then_its_tasks_may_only_set_their_own_protection(
    example: Synthesis,
) -> None:
    template = example.templates["PailExample"]
    cluster = logical_id(template, "AWS::ECS::Cluster", "ExportTaskCluster")

    assert _ecs_statements(template) == {
        Statement(
            actions=("ecs:UpdateTaskProtection",),
            resources=(
                f"arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/<{cluster}>/*",
            ),
        )
    }


def test_given_once_mode_when_synthesised_then_its_tasks_get_no_ecs_right(
    variants: Synthesis,
) -> None:
    assert _ecs_statements(variants.templates["Once"]) == set()
