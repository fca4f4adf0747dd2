"""PailQueue: the bucket's secure defaults, lifecycle, CORS, the reaper and its schedule, alarms."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match, Template

from pail import config, metrics_names
from pail.keys import DEDUP, DLQ, DONE, INDEX, QUEUE, RATE, RUN

from .conftest import Synthesis
from .helpers import logical_id

NIGHTLY = [
    {
        "name": "nightly-report",
        "payload": {
            "report_id": "nightly",
            "rows": [{"region": "EU", "product": "pail", "amount": 1.0, "units": 1}],
        },
        "cron": "0 2 * * *",
        "every": None,
        "timezone": "Europe/Berlin",
        "catch_up": 1,
    }
]
"""The schedule infra/app.py declares, as the reaper function gets it (docs/schedules.md)."""


def test_given_default_queue_when_synthesised_then_bucket_blocks_public_access_and_encrypts(
    example_template: Template,
) -> None:
    example_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


def test_given_default_queue_when_synthesised_then_bucket_is_retained(
    example_template: Template,
) -> None:
    example_template.has_resource(
        "AWS::S3::Bucket", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    )
    example_template.resource_count_is("AWS::S3::Bucket", 1)  # the two queues share it


def test_given_default_queue_when_synthesised_then_bucket_policy_denies_plain_http_and_old_tls(
    example_template: Template,
) -> None:
    example_template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ),
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}},
                            }
                        ),
                    ]
                )
            }
        },
    )


def test_given_default_queue_when_synthesised_then_bucket_sends_events_to_eventbridge(
    example_template: Template,
) -> None:
    example_template.has_resource_properties(
        "AWS::S3::Bucket",
        {"NotificationConfiguration": {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}},
    )
    # No custom resource manages the notification configuration.
    example_template.resource_count_is("Custom::S3BucketNotifications", 0)


def test_given_two_queues_in_one_bucket_when_synthesised_then_lifecycle_expires_results_and_dead_letters(
    example_template: Template,
) -> None:
    rules = [
        {"Id": "pail-_default-results", "Prefix": DONE, "ExpirationInDays": 7, "Status": "Enabled"},
        {
            "Id": "pail-_default-dead-letters",
            "Prefix": DLQ,
            "ExpirationInDays": 30,
            "Status": "Enabled",
        },
        {
            "Id": "pail-exports-results",
            "Prefix": f"exports/{DONE}",
            "ExpirationInDays": 7,
            "Status": "Enabled",
        },
        {
            "Id": "pail-exports-dead-letters",
            "Prefix": f"exports/{DLQ}",
            "ExpirationInDays": 30,
            "Status": "Enabled",
        },
    ]
    example_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like(rules[0]),
                        Match.object_like(rules[1]),
                        Match.object_like(
                            {
                                "Id": "pail-_default-multipart",
                                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                            }
                        ),
                        Match.object_like(rules[2]),
                        Match.object_like(rules[3]),
                    ]
                )
            }
        },
    )


def test_given_any_queue_when_synthesised_then_no_rule_expires_pending_or_running_jobs(
    example: Synthesis, variants: Synthesis
) -> None:
    for synthesis in (example, variants):
        for stack in synthesis.templates:
            for bucket in synthesis.resources(stack, "AWS::S3::Bucket").values():
                for rule in bucket["Properties"].get("LifecycleConfiguration", {}).get("Rules", []):
                    prefix = rule.get("Prefix", "")
                    if "ExpirationInDays" in rule:
                        # Results, dead letters, dedup keys, the search index and rate
                        # limits' start tokens may expire.
                        assert prefix.endswith((DONE, DLQ, DEDUP, INDEX, RATE)), rule
                    assert not prefix.endswith((QUEUE, RUN)), rule


def test_given_default_queue_when_synthesised_then_cors_allows_browsers_to_get_results(
    example_template: Template,
) -> None:
    example_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "CorsConfiguration": {
                "CorsRules": [
                    {
                        "Id": "pail-_default-results",
                        "AllowedMethods": ["GET", "HEAD"],
                        "AllowedOrigins": ["*"],
                        "ExposedHeaders": ["ETag", "x-amz-meta-pail-outcome"],
                        "MaxAge": 300,
                    }
                ]
            }
        },
    )


def test_given_custom_props_when_synthesised_then_user_overrides_and_options_apply(
    variants: Synthesis,
) -> None:
    template = variants.template("Grants")
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": {"Status": "Enabled"},
            "CorsConfiguration": {
                "CorsRules": [Match.object_like({"AllowedOrigins": ["https://app.example.com"]})]
            },
            "LifecycleConfiguration": {
                "Rules": [
                    Match.object_like({"Prefix": f"reports/{DONE}", "ExpirationInDays": 3}),
                    Match.object_like({"Prefix": f"reports/{DEDUP}", "ExpirationInDays": 2}),
                    # A rate limit's start tokens: always, a day after their write.
                    Match.object_like({"Prefix": f"reports/{RATE}", "ExpirationInDays": 1}),
                    Match.object_like(
                        {"Prefix": "reports/", "AbortIncompleteMultipartUpload": Match.any_value()}
                    ),
                ]
            },
        },
    )


def test_given_default_queue_when_synthesised_then_schedule_rule_targets_the_reaper(
    example: Synthesis, example_template: Template
) -> None:
    template = example.templates["PailExample"]
    reaper = logical_id(template, "AWS::Lambda::Function", "JobsReaper")
    example_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 minute)",
            "State": "ENABLED",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [reaper, "Arn"]}})],
        },
    )


def test_given_default_queue_when_synthesised_then_reaper_runs_the_runtime_handler_bounded(
    example: Synthesis, example_template: Template
) -> None:
    template = example.templates["PailExample"]
    bucket = logical_id(template, "AWS::S3::Bucket", "JobsBucket")
    worker = logical_id(template, "AWS::Lambda::Function", "ReportWorkerFunction")
    example_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "index.handler",
            "Code": {"ZipFile": "from pail.aws.reaper import handler as handler\n"},
            "Runtime": "python3.12",
            "Architectures": ["arm64"],
            "Timeout": 60,
            "MemorySize": 256,
            "ReservedConcurrentExecutions": 1,
            "Layers": [{"Ref": Match.string_like_regexp("^PailRuntimeLayerarm64")}],
            "Environment": {
                "Variables": {
                    config.ENV_BUCKET: {"Ref": bucket},
                    config.ENV_VISIBILITY_TIMEOUT: "30",
                    config.ENV_MAX_RETRIES: "3",
                    config.ENV_SHARDS: "1",
                    config.ENV_WORKER_FUNCTION: {"Ref": worker},
                    config.ENV_SCHEDULES: json.dumps(NIGHTLY, separators=(",", ":")),
                }
            },
        },
    )
    example_template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": Match.string_like_regexp("^JobsReaper")},
            "MaximumRetryAttempts": 0,
        },
    )
    example_template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})


def test_given_namespaced_queue_when_synthesised_then_reaper_gets_the_namespace(
    example_template: Template,
) -> None:
    example_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "index.handler",
            "Environment": {"Variables": Match.object_like({config.ENV_QUEUE: "exports"})},
        },
    )


def test_given_options_when_synthesised_then_environment_spells_them_for_the_runtime(
    variants: Synthesis,
) -> None:
    variants.template("Grants").has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Environment": {
                "Variables": Match.object_like(
                    {
                        config.ENV_QUEUE: "reports",
                        config.ENV_VISIBILITY_TIMEOUT: "90",
                        config.ENV_MAX_RETRIES: config.UNLIMITED,
                    }
                )
            },
        },
    )


def _alarm(namespace: str, metric: str, threshold: float) -> dict[str, object]:
    return {
        "Namespace": metrics_names.NAMESPACE,
        "MetricName": metric,
        "Dimensions": [{"Name": metrics_names.DIMENSION_QUEUE, "Value": namespace}],
        "Statistic": "Maximum",
        "Threshold": threshold,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
    }


def test_given_default_queue_when_synthesised_then_alarms_watch_dead_letters_and_backlog_age(
    example_template: Template,
) -> None:
    for queue in (metrics_names.queue_dimension(""), "exports"):
        example_template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            _alarm(queue, metrics_names.DEAD_LETTERED_JOBS, 0) | {"Period": 300},
        )
        example_template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            _alarm(queue, metrics_names.OLDEST_PENDING_AGE_SECONDS, 900) | {"Period": 300},
        )
    example_template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "Errors", "Namespace": "AWS/Lambda", "Threshold": 1},
    )
    # Three per queue, and the Fargate service's two scaling alarms (test_scaling.py).
    example_template.resource_count_is("AWS::CloudWatch::Alarm", 8)


def test_given_alarm_topic_when_synthesised_then_every_alarm_notifies_it(
    variants: Synthesis,
) -> None:
    template = variants.templates["Grants"]
    topic = logical_id(template, "AWS::SNS::Topic", "Alarms")
    alarms = variants.resources("Grants", "AWS::CloudWatch::Alarm")
    assert len(alarms) == 3
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
    variants.template("Grants").has_resource_properties(
        "AWS::CloudWatch::Alarm",
        # The period follows a slower reaper schedule (10 minutes).
        _alarm("reports", metrics_names.OLDEST_PENDING_AGE_SECONDS, 1800) | {"Period": 600},
    )


def test_given_imported_bucket_when_synthesised_then_a_warning_says_what_to_configure(
    variants: Synthesis,
) -> None:
    assert not variants.resources("Imported", "AWS::S3::Bucket")
    assert any("EventBridge notifications" in warning for warning in variants.warnings)


def test_given_declared_schedules_when_synthesised_then_each_reaper_gets_its_queue_s_own(
    example_template: Template,
) -> None:
    # The Jobs reaper carries nightly-report (the exact variables above); the
    # Exports queue declares none, and gets [] so a deploy that drops its last
    # schedule removes it from the bucket.
    example_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Environment": {
                "Variables": Match.object_like(
                    {config.ENV_QUEUE: "exports", config.ENV_SCHEDULES: "[]"}
                )
            },
        },
    )
