"""A queue in an S3 Express One Zone directory bucket: the bucket, its lifecycle, session grants.

What differs from a general purpose bucket is in ``pail_cdk.directory_bucket``
and ``docs/scaling.md`` ("S3 Express One Zone"). The app (``ExpressStack``,
``ImportedExpressStack`` in ``conftest.py``) runs cdk-nag's AWS Solutions checks.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Duration, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match

from pail import config
from pail.keys import DLQ, DONE, INDEX, RATE
from pail_cdk import PailQueue
from pail_cdk.errors import PailCdkError

from .conftest import Synthesis
from .helpers import Statement, logical_id, statements

CREATE_SESSION = "s3express:CreateSession"
READ_ONLY = (("StringEquals", (("s3express:SessionMode", "ReadOnly"),)),)


def _bucket(express: Synthesis) -> str:
    return logical_id(
        express.templates["Express"], "AWS::S3Express::DirectoryBucket", "JobsDirectoryBucket"
    )


def _sessions(express: Synthesis, role_prefix: str) -> set[Statement]:
    template = express.templates["Express"]
    return {s for s in statements(template, role_prefix) if s.actions == (CREATE_SESSION,)}


def test_given_express_zone_id_when_synthesised_then_a_retained_encrypted_directory_bucket(
    express: Synthesis,
) -> None:
    template = express.template("Express")
    template.has_resource(
        "AWS::S3Express::DirectoryBucket",
        {
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": Match.object_like(
                {
                    "BucketName": "reports--use1-az4--x-s3",
                    "DataRedundancy": "SingleAvailabilityZone",
                    "LocationName": "use1-az4",
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    },
                }
            ),
        },
    )
    template.resource_count_is("AWS::S3::Bucket", 0)


def test_given_express_queue_when_synthesised_then_results_and_dead_letters_expire(
    express: Synthesis,
) -> None:
    (bucket,) = express.resources("Express", "AWS::S3Express::DirectoryBucket").values()
    rules = {r["Id"]: r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules == {
        "pail-_default-results": {
            "Id": "pail-_default-results",
            "Status": "Enabled",
            "Prefix": DONE,
            "ExpirationInDays": 7,
        },
        "pail-_default-dead-letters": {
            "Id": "pail-_default-dead-letters",
            "Status": "Enabled",
            "Prefix": DLQ,
            "ExpirationInDays": 30,
        },
        # The longer of the two: a dead letter is found by its tags while it is kept.
        "pail-_default-search-index": {
            "Id": "pail-_default-search-index",
            "Status": "Enabled",
            "Prefix": INDEX,
            "ExpirationInDays": 30,
        },
        # A rate limit's start tokens, once their window (at most a day) is over.
        "pail-_default-rate-tokens": {
            "Id": "pail-_default-rate-tokens",
            "Status": "Enabled",
            "Prefix": RATE,
            "ExpirationInDays": 1,
        },
        "pail-_default-multipart": {
            "Id": "pail-_default-multipart",
            "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
    }
    # S3 Lifecycle acts on a directory bucket through sessions of its own.
    express.template("Express").has_resource_properties(
        "AWS::S3Express::BucketPolicy",
        {
            "Bucket": {"Ref": _bucket(express)},
            "PolicyDocument": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "lifecycle.s3.amazonaws.com"},
                        "Action": CREATE_SESSION,
                        "Resource": {"Fn::GetAtt": [_bucket(express), "Arn"]},
                        "Condition": {"StringEquals": {"s3express:SessionMode": "ReadWrite"}},
                    }
                ],
                "Version": "2012-10-17",
            },
        },
    )


def test_given_express_queue_when_granted_then_roles_open_sessions_on_the_bucket_only(
    express: Synthesis,
) -> None:
    bucket_arn = (f"<{_bucket(express)}.Arn>",)
    read_write = Statement((CREATE_SESSION,), bucket_arn)
    for role in ("JobsReaperRole", "WorkerRole", "ServiceTaskDefinitionTaskRole", "Producer"):
        assert _sessions(express, role) == {read_write}, role
    assert _sessions(express, "Reader") == {Statement((CREATE_SESSION,), bucket_arn, READ_ONLY)}
    # A directory bucket knows no s3: object actions: none is granted anywhere.
    for policy in express.resources("Express", "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            assert not [a for a in actions if a.startswith("s3:")], statement


def test_given_express_queue_when_synthesised_then_workers_point_at_it_and_no_rule_waits_for_events(
    express: Synthesis,
) -> None:
    template = express.templates["Express"]
    worker = logical_id(template, "AWS::Lambda::Function", "WorkerFunction")
    variables = template["Resources"][worker]["Properties"]["Environment"]["Variables"]
    assert variables[config.ENV_BUCKET] == {"Ref": _bucket(express)}
    rules = express.resources("Express", "AWS::Events::Rule").values()
    assert [r for r in rules if "EventPattern" in r["Properties"]] == []
    # The Lambda worker and the service still run: on schedules, the reaper's self-heal
    # and the scale-out alarm; each says so in the synth's messages.
    assert len([r for r in rules if "ScheduleExpression" in r["Properties"]]) == 2
    express.template("Express").resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)
    # The tasks reach the directory bucket's zonal endpoint through its own gateway endpoint.
    express.template("Express").has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {
            "VpcEndpointType": "Gateway",
            "ServiceName": {
                "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3express"]]
            },
        },
    )
    notes = [info for info in express.infos if "sends no events" in info]
    assert {note.split(":", 1)[0] for note in notes} == {"/Express/Worker", "/Express/Service"}


def test_given_an_imported_directory_bucket_when_granted_then_sessions_on_its_arn(
    express: Synthesis,
) -> None:
    template = express.templates["ImportedExpress"]
    reaper = statements(template, "QueueReaperRole")
    arn = (
        "arn:<AWS::Partition>:s3express:<AWS::Region>:<AWS::AccountId>:bucket/jobs--use1-az4--x-s3"
    )
    assert Statement((CREATE_SESSION,), (arn,)) in reaper
    # It cannot configure the imported bucket, and says so (acknowledged in the test app).
    acknowledged = [rules for path, rules in express.acknowledgements.items() if "Queue" in path]
    assert any("Annotation::pail:ImportedBucket" in rules for rules in acknowledged)


def test_given_express_apps_when_synthesised_with_cdk_nag_then_no_unacknowledged_finding(
    express: Synthesis,
) -> None:
    violations = [
        (violation["ruleName"], construct["constructPath"])
        for report in express.report.get("pluginReports", [])
        for violation in report.get("violations", [])
        for construct in violation["violatingConstructs"]
    ]
    assert violations == []
    assert express.error is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"express_zone_id": "us-east-1a"}, "Availability Zone ID"),
        ({"express_zone_id": "use1-az4", "express_bucket_name": "Reports"}, "lowercase"),
        ({"express_zone_id": "use1-az4", "express_bucket_name": "a--b"}, "single hyphens"),
        ({"express_zone_id": "use1-az4", "express_bucket_name": "x" * 60}, "at most 63"),
        ({"express_bucket_name": "reports"}, "needs express_zone_id"),
        (
            {"express_zone_id": "use1-az4", "bucket_props": s3.BucketProps(versioned=True)},
            "pass no bucket or bucket_props",
        ),
        ({"express_zone_id": "use1-az4", "cors_allowed_origins": ["*"]}, "no CORS"),
        ({"express_zone_id": "use1-az4", "result_ttl": Duration.hours(12)}, None),
    ],
)
def test_given_bad_express_options_when_constructed_then_rejects_them(
    stack: Stack, kwargs: dict[str, Any], message: str | None
) -> None:
    if message is None:  # whole days only, as for a general purpose bucket's lifecycle
        with pytest.raises(Exception, match=r"whole|integral|days"):
            PailQueue(stack, "Queue", **kwargs)
        return
    with pytest.raises(ValueError, match=message):
        PailQueue(stack, "Queue", **kwargs)


def test_given_an_express_queue_when_asked_for_an_s3_bucket_then_says_what_to_use(
    stack: Stack,
) -> None:
    queue = PailQueue(stack, "Queue", express_zone_id="use1-az4")
    assert queue.express and not queue.sends_events
    with pytest.raises(PailCdkError, match="bucket_name"):
        queue.bucket  # noqa: B018 - the property raises
    with pytest.raises(PailCdkError, match="sends no events"):
        queue.enqueued_event_pattern()
