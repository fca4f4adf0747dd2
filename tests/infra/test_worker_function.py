"""PailWorkerFunction: the user's handler with the runtime layer, its triggers and limits."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from pail import config
from pail.keys import QUEUE

from .conftest import Synthesis
from .helpers import logical_id


def test_given_worker_when_synthesised_then_it_runs_the_users_handler_with_the_runtime_layer(
    example: Synthesis, example_template: Template
) -> None:
    template = example.templates["PailExample"]
    bucket = logical_id(template, "AWS::S3::Bucket", "JobsBucket")
    example_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "report.handler",
            "Runtime": "python3.12",
            "Architectures": ["arm64"],
            "Timeout": 300,
            "MemorySize": 512,
            "ReservedConcurrentExecutions": 5,
            "Layers": [{"Ref": Match.string_like_regexp("^PailRuntimeLayerarm64")}],
            "Environment": {
                "Variables": {
                    config.ENV_BUCKET: {"Ref": bucket},
                    config.ENV_VISIBILITY_TIMEOUT: "30",
                    config.ENV_MAX_RETRIES: "3",
                    config.ENV_SHARDS: "1",
                    config.ENV_SAFETY_MARGIN: "60",
                    # The scheduled reaper reclaims: no reclaim pass per cold start.
                    config.ENV_RECLAIM: "false",
                }
            },
        },
    )
    # The reaper and the worker share one layer.
    example_template.resource_count_is("AWS::Lambda::LayerVersion", 1)
    example_template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": Match.string_like_regexp("^ReportWorkerFunction")},
            "MaximumRetryAttempts": 0,
        },
    )


def test_given_worker_when_synthesised_then_object_created_under_queue_invokes_it(
    example: Synthesis, example_template: Template
) -> None:
    template = example.templates["PailExample"]
    bucket = logical_id(template, "AWS::S3::Bucket", "JobsBucket")
    worker = logical_id(template, "AWS::Lambda::Function", "ReportWorkerFunction")
    example_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {
                    "bucket": {"name": [{"Ref": bucket}]},
                    "object": {"key": [{"prefix": QUEUE}]},
                },
            },
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [worker, "Arn"]}})],
        },
    )
    example_template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [worker, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": {
                "Fn::GetAtt": [Match.string_like_regexp("^ReportWorkerOnEnqueue"), "Arn"]
            },
        },
    )


def test_given_worker_when_synthesised_then_a_schedule_is_its_safety_net(
    example: Synthesis, example_template: Template
) -> None:
    worker = logical_id(
        example.templates["PailExample"], "AWS::Lambda::Function", "ReportWorkerFunction"
    )
    example_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(5 minutes)",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [worker, "Arn"]}})],
        },
    )


def test_given_public_powertools_option_when_synthesised_then_layer_arn_comes_from_ssm(
    variants: Synthesis,
) -> None:
    template = variants.template("Imported")
    parameters = variants.templates["Imported"]["Parameters"]
    ssm = [
        name
        for name, parameter in parameters.items()
        if parameter.get("Default") == "/aws/service/powertools/python/x86_64/python3.12/latest"
    ]
    assert len(ssm) == 1
    assert parameters[ssm[0]]["Type"] == "AWS::SSM::Parameter::Value<String>"
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "report.handler",
            "Architectures": ["x86_64"],
            "Layers": [
                {"Ref": Match.string_like_regexp("^PailRuntimeLayerx8664nopowertools")},
                {"Ref": ssm[0]},
            ],
            "ReservedConcurrentExecutions": Match.absent(),
            "Environment": {
                "Variables": Match.object_like(
                    {
                        config.ENV_BUCKET: "existing-jobs-bucket",
                        config.ENV_QUEUE: "imports",
                        config.ENV_SHARDS: "4",
                        config.ENV_MAX_JOBS: "10",
                    }
                )
            },
        },
    )


def test_given_imported_bucket_when_synthesised_then_the_rule_filters_its_namespace(
    variants: Synthesis,
) -> None:
    variants.template("Imported").has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": Match.object_like(
                {
                    "detail": {
                        "bucket": {"name": ["existing-jobs-bucket"]},
                        "object": {"key": [{"prefix": f"imports/{QUEUE}"}]},
                    }
                }
            )
        },
    )
    # schedule=None: the enqueue rule and the reaper's schedule only.
    variants.template("Imported").resource_count_is("AWS::Events::Rule", 2)
