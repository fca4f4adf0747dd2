"""An auto scaling Fargate service: its scalable target, step policies, alarms and wake-up.

The example app's ``ExportTask`` scales from 0 to 4 tasks on queue ``exports``;
the ``Scaled`` variant keeps at least one task on the default queue, with its
own steps and a reaper every 2 minutes.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from pail import metrics_names
from pail.keys import QUEUE
from pail_cdk.wake import WAKE_ACTIONS, handler_source
from pail_cdk.wake_handler import ENV_CLUSTER, ENV_SERVICE, ENV_TASKS

from .conftest import Synthesis
from .helpers import Statement, logical_id, statements

EXAMPLE = "PailExample"


def _only(synthesis: Synthesis, stack: str, kind: str, prefix: str) -> tuple[str, dict[str, Any]]:
    template = synthesis.templates[stack]
    name = logical_id(template, kind, prefix)
    return name, template["Resources"][name]["Properties"]


def _queries(alarm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The alarm's metric queries by id: an expression or a metric with its stat and period."""
    return {query["Id"]: query for query in alarm["Metrics"]}


def _pail_metric(name: str, queue: str, period: int) -> dict[str, Any]:
    return {
        "Metric": {
            "Dimensions": [{"Name": metrics_names.DIMENSION_QUEUE, "Value": queue}],
            "MetricName": name,
            "Namespace": metrics_names.NAMESPACE,
        },
        "Period": period,
        "Stat": "Maximum",
    }


@pytest.fixture(scope="module")
def service(example: Synthesis) -> str:
    return logical_id(example.templates[EXAMPLE], "AWS::ECS::Service", "ExportTaskService")


@pytest.fixture(scope="module")
def cluster(example: Synthesis) -> str:
    return logical_id(example.templates[EXAMPLE], "AWS::ECS::Cluster", "ExportTaskCluster")


def test_given_the_example_service_when_synthesised_then_it_scales_between_0_and_4_tasks(
    example: Synthesis, example_template: Template, service: str, cluster: str
) -> None:
    example_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": 0,
            "MaxCapacity": 4,
            "ServiceNamespace": "ecs",
            "ScalableDimension": "ecs:service:DesiredCount",
            "ResourceId": {
                "Fn::Join": [
                    "",
                    ["service/", {"Ref": cluster}, "/", {"Fn::GetAtt": [service, "Name"]}],
                ]
            },
            # ECS's service-linked role: no role of the stack's own to scale with.
            "RoleARN": {
                "Fn::Join": [
                    "",
                    Match.array_with(
                        [
                            Match.string_like_regexp(
                                "AWSServiceRoleForApplicationAutoScaling_ECSService$"
                            )
                        ]
                    ),
                ]
            },
        },
    )
    # The policy owns the count: no DesiredCount for a deployment to reset it to.
    (props,) = [
        r["Properties"]
        for r in example.resources(EXAMPLE, "AWS::ECS::Service").values()
        if r["Properties"]
    ]
    assert "DesiredCount" not in props


def test_given_the_example_service_when_jobs_wait_then_a_step_policy_adds_a_task_per_job(
    example: Synthesis,
) -> None:
    policy, scale_out = _only(
        example, EXAMPLE, "AWS::ApplicationAutoScaling::ScalingPolicy", "ExportTaskScalingScaleOut"
    )
    target = logical_id(
        example.templates[EXAMPLE],
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "ExportTaskScalingTarget",
    )
    assert scale_out["ScalingTargetId"] == {"Ref": target}
    assert scale_out["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "Cooldown": 120,
        "MetricAggregationType": "Maximum",
        # Relative to the alarm's threshold of 1 waiting job: 1, 2-4, 5-9, 10 or more.
        "StepAdjustments": [
            {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 1, "ScalingAdjustment": 1},
            {"MetricIntervalLowerBound": 1, "MetricIntervalUpperBound": 4, "ScalingAdjustment": 2},
            {"MetricIntervalLowerBound": 4, "MetricIntervalUpperBound": 9, "ScalingAdjustment": 5},
            {"MetricIntervalLowerBound": 9, "ScalingAdjustment": 10},
        ],
    }
    _, alarm = _only(example, EXAMPLE, "AWS::CloudWatch::Alarm", "ExportTaskScalingScaleOutAlarm")
    assert alarm["AlarmActions"] == [{"Ref": policy}]
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 1)
    queries = _queries(alarm)
    (expression,) = [q for q in queries.values() if q.get("ReturnData", True)]
    assert expression["Expression"] == "IF(age >= 30, pending, 0)"
    assert queries["age"]["MetricStat"] == _pail_metric(
        metrics_names.OLDEST_PENDING_AGE_SECONDS, "exports", 60
    )
    assert queries["pending"]["MetricStat"] == _pail_metric(
        metrics_names.PENDING_JOBS, "exports", 60
    )


def test_given_the_example_service_when_idle_then_a_policy_stops_every_task_above_the_minimum(
    example: Synthesis, service: str, cluster: str
) -> None:
    policy, scale_in = _only(
        example, EXAMPLE, "AWS::ApplicationAutoScaling::ScalingPolicy", "ExportTaskScalingScaleIn"
    )
    assert scale_in["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "Cooldown": 300,
        "MetricAggregationType": "Maximum",
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": -4}],
    }
    _, alarm = _only(example, EXAMPLE, "AWS::CloudWatch::Alarm", "ExportTaskScalingScaleInAlarm")
    assert alarm["AlarmActions"] == [{"Ref": policy}]
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 5)
    queries = _queries(alarm)
    (expression,) = [q for q in queries.values() if q.get("ReturnData", True)]
    # Tasks run (the service's CPU metric has samples), no lease is live, no due job waits.
    assert expression["Expression"] == "IF((live + IF(age > 0, pending, 0)) > 0, 0, FILL(tasks, 0))"
    assert queries["live"]["MetricStat"] == _pail_metric(metrics_names.LIVE_LEASES, "exports", 60)
    assert queries["age"]["MetricStat"] == _pail_metric(
        metrics_names.OLDEST_PENDING_AGE_SECONDS, "exports", 60
    )
    assert queries["pending"]["MetricStat"] == _pail_metric(
        metrics_names.PENDING_JOBS, "exports", 60
    )
    assert queries["tasks"]["MetricStat"] == {
        "Metric": {
            "Dimensions": [
                {"Name": "ClusterName", "Value": {"Ref": cluster}},
                {"Name": "ServiceName", "Value": {"Fn::GetAtt": [service, "Name"]}},
            ],
            "MetricName": "CPUUtilization",
            "Namespace": "AWS/ECS",
        },
        "Period": 60,
        "Stat": "SampleCount",
    }


def test_given_the_example_service_when_a_job_is_enqueued_then_a_rule_invokes_the_wake_up(
    example: Synthesis, example_template: Template, service: str, cluster: str
) -> None:
    function, props = _only(example, EXAMPLE, "AWS::Lambda::Function", "ExportTaskWakeFunction")
    rule = logical_id(example.templates[EXAMPLE], "AWS::Events::Rule", "ExportTaskWakeOnEnqueue")
    bucket = logical_id(example.templates[EXAMPLE], "AWS::S3::Bucket", "JobsBucket")
    example_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {
                    "bucket": {"name": [{"Ref": bucket}]},
                    "object": {"key": [{"prefix": f"exports/{QUEUE}"}]},
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [function, "Arn"]},
                        "RetryPolicy": {"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 2},
                    }
                )
            ],
        },
    )
    # Only that rule may invoke it.
    example_template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [function, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": {"Fn::GetAtt": [rule, "Arn"]},
        },
    )
    assert props["Code"] == {"ZipFile": handler_source()}
    assert props["Handler"] == "index.handler"
    assert props["ReservedConcurrentExecutions"] == 1
    assert props["Environment"]["Variables"] == {
        ENV_CLUSTER: {"Ref": cluster},
        ENV_SERVICE: {"Fn::GetAtt": [service, "Name"]},
        ENV_TASKS: "1",
    }


def test_given_the_wake_up_function_when_synthesised_then_it_may_only_describe_and_update_the_service(
    example: Synthesis, service: str
) -> None:
    template = example.templates[EXAMPLE]
    logs = logical_id(template, "AWS::Logs::LogGroup", "ExportTaskWakeLogs")
    assert statements(template, "ExportTaskWakeRole") == {
        Statement(tuple(sorted(WAKE_ACTIONS)), (f"<{service}>",)),
        Statement(("logs:CreateLogStream", "logs:PutLogEvents"), (f"<{logs}.Arn>",)),
    }


def test_given_a_scaled_service_on_the_default_queue_then_its_alarms_select_the_default_dimension(
    variants: Synthesis,
) -> None:
    template = variants.template("Scaled")
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 1, "MaxCapacity": 10}
    )
    # min_tasks=1 never reaches 0: no wake-up.
    functions = variants.resources("Scaled", "AWS::Lambda::Function").values()
    assert [
        f for f in functions if f["Properties"].get("Code") == {"ZipFile": handler_source()}
    ] == []
    template.resource_count_is("AWS::Events::Rule", 1)  # the reaper's schedule
    _, scale_out = _only(
        variants, "Scaled", "AWS::ApplicationAutoScaling::ScalingPolicy", "ServiceScalingScaleOut"
    )
    assert scale_out["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 47, "ScalingAdjustment": 1},
        {"MetricIntervalLowerBound": 47, "ScalingAdjustment": 4},
    ]
    _, out_alarm = _only(
        variants, "Scaled", "AWS::CloudWatch::Alarm", "ServiceScalingScaleOutAlarm"
    )
    assert out_alarm["Threshold"] == 3
    queries = _queries(out_alarm)
    assert queries["pending"]["MetricStat"] == _pail_metric(
        metrics_names.PENDING_JOBS, metrics_names.DEFAULT_QUEUE_DIMENSION, 120
    )
    assert "IF(age >= 120, pending, 0)" in [q.get("Expression") for q in queries.values()]
    _, in_alarm = _only(variants, "Scaled", "AWS::CloudWatch::Alarm", "ServiceScalingScaleInAlarm")
    # 15 minutes of 2-minute periods.
    assert in_alarm["EvaluationPeriods"] == 8
    assert _queries(in_alarm)["live"]["MetricStat"] == _pail_metric(
        metrics_names.LIVE_LEASES, metrics_names.DEFAULT_QUEUE_DIMENSION, 120
    )
