"""Each grant's exact actions and prefix-scoped resources; nothing is bucket-wide."""

from __future__ import annotations

from typing import Any

import pytest

from pail.keys import ALL_PREFIXES, DEDUP, DLQ, DONE, INDEX, QUEUE, RATE, RUN, SYSTEM, WAIT
from pail_cdk.access import LIMITS_OBJECT, PAUSE_MARKER, SCHEDULE_DEFINITIONS, SLOT_OBJECTS

from .conftest import Synthesis
from .helpers import Statement, condition, logical_id, render, s3_statements, statements

GET, PUT, DELETE, LIST = "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"


def _bucket(template: dict[str, Any], prefix: str) -> str:
    return f"<{logical_id(template, 'AWS::S3::Bucket', prefix)}.Arn>"


def _objects(bucket: str, root: str, *prefixes: str) -> tuple[str, ...]:
    return tuple(sorted(f"{bucket}/{root}{prefix}*" for prefix in prefixes))


def _listing(bucket: str, root: str, *prefixes: str) -> Statement:
    return Statement((LIST,), (bucket,), condition([f"{root}{prefix}*" for prefix in prefixes]))


@pytest.fixture(scope="module")
def grants(variants: Synthesis) -> dict[str, Any]:
    return variants.templates["Grants"]


def test_given_grant_enqueue_when_synthesised_then_only_put_on_queue(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "Producer") == {
        Statement((PUT,), _objects(bucket, "reports/", QUEUE)),
    }


def test_given_grant_enqueue_keyed_when_synthesised_then_keys_queue_and_status_reads(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "KeyedProducer") == {
        Statement((GET, PUT), _objects(bucket, "reports/", QUEUE, DEDUP)),
        Statement((GET,), _objects(bucket, "reports/", RUN, DONE, DLQ, WAIT)),
        _listing(bucket, "reports/", *ALL_PREFIXES, DEDUP),
    }


def test_given_grant_enqueue_with_tags_when_synthesised_then_put_on_queue_and_the_index(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "TaggedProducer") == {
        Statement((PUT,), _objects(bucket, "reports/", QUEUE, INDEX)),
    }


def test_given_grant_search_when_synthesised_then_status_reads_and_the_index(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "Searcher") == {
        Statement((GET,), _objects(bucket, "reports/", *ALL_PREFIXES)),
        Statement((DELETE, GET), _objects(bucket, "reports/", INDEX)),
        _listing(bucket, "reports/", *ALL_PREFIXES, INDEX),
    }


def test_given_dead_letters_kept_for_ever_when_synthesised_then_the_index_is_kept_too(
    grants: dict[str, Any],
) -> None:
    # The Grants queue keeps its dead letters (dlq_retention=None): a dead letter stays
    # findable by its tags, so its index entries stay (the Express queue's expire: 30 days).
    [bucket] = [r for r in grants["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    rules = {rule["Id"]: rule for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert "pail-reports-results" in rules and "pail-reports-search-index" not in rules


def test_given_dedup_key_ttl_when_synthesised_then_keys_expire_before_results(
    grants: dict[str, Any],
) -> None:
    [bucket] = [r for r in grants["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    rules = {rule["Id"]: rule for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["pail-reports-dedup-keys"]["Prefix"] == f"reports/{DEDUP}"
    assert rules["pail-reports-dedup-keys"]["ExpirationInDays"] == 2
    assert rules["pail-reports-results"]["ExpirationInDays"] == 3


def test_given_grant_consume_when_synthesised_then_the_four_prefixes_and_their_listing(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "Consumer") == {
        # Under limits: slots taken and given back, rate tokens created (docs/limits.md).
        Statement((DELETE, GET, PUT), _objects(bucket, "reports/", *ALL_PREFIXES, SLOT_OBJECTS)),
        Statement((GET,), _objects(bucket, "reports/", PAUSE_MARKER, LIMITS_OBJECT)),
        Statement((PUT,), _objects(bucket, "reports/", RATE)),
        _listing(
            bucket, "reports/", *ALL_PREFIXES, PAUSE_MARKER, LIMITS_OBJECT, SLOT_OBJECTS, RATE
        ),
    }


def test_given_grant_read_results_when_synthesised_then_only_get_and_list_done(
    grants: dict[str, Any],
) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "Reader") == {
        Statement((GET,), _objects(bucket, "reports/", DONE)),
        _listing(bucket, "reports/", DONE),
    }


def test_given_grant_read_status_when_synthesised_then_only_reads(grants: dict[str, Any]) -> None:
    bucket = _bucket(grants, "QueueBucket")
    assert s3_statements(grants, "Status") == {
        Statement((GET,), _objects(bucket, "reports/", *ALL_PREFIXES)),
        _listing(bucket, "reports/", *ALL_PREFIXES),
    }


def test_given_reaper_when_synthesised_then_least_privilege_for_reaping(
    example: Synthesis,
) -> None:
    template = example.templates["PailExample"]
    bucket = _bucket(template, "JobsBucket")
    worker = logical_id(template, "AWS::Lambda::Function", "ReportWorkerFunction")
    logs = logical_id(template, "AWS::Logs::LogGroup", "JobsReaperLogs")
    assert statements(template, "JobsReaperRole") == {
        # Deletes under all four: a crashed claim's entry (reap step 4), and the dead
        # letter and dead marker of a redrive that stopped half-way (redrive.finish).
        # And the schedules (docs/schedules.md): their definitions, which a deploy's
        # sync may delete, and a keyed enqueue per tick (keys/ and queue/).
        # And the slots of dead workers, which its pass recovers (docs/limits.md).
        Statement(
            (DELETE, GET, PUT),
            _objects(bucket, "", *ALL_PREFIXES, SCHEDULE_DEFINITIONS, SLOT_OBJECTS),
        ),
        Statement((GET, PUT), _objects(bucket, "", SYSTEM, DEDUP)),
        _listing(bucket, "", *ALL_PREFIXES, SYSTEM, DEDUP),
        Statement(("logs:CreateLogStream", "logs:PutLogEvents"), (f"<{logs}.Arn>",)),
        # Self-healing: the reaper may start the worker function, that one only.
        Statement(("lambda:InvokeFunction",), (f"<{worker}.Arn>",)),
    }


def test_given_lambda_worker_when_synthesised_then_it_consumes_its_own_queue_only(
    example: Synthesis,
) -> None:
    template = example.templates["PailExample"]
    bucket = _bucket(template, "JobsBucket")
    assert s3_statements(template, "ReportWorkerRole") == {
        # Under limits: slots taken and given back, rate tokens created (docs/limits.md).
        Statement((DELETE, GET, PUT), _objects(bucket, "", *ALL_PREFIXES, SLOT_OBJECTS)),
        Statement((GET,), _objects(bucket, "", PAUSE_MARKER, LIMITS_OBJECT)),
        Statement((PUT,), _objects(bucket, "", RATE)),
        _listing(bucket, "", *ALL_PREFIXES, PAUSE_MARKER, LIMITS_OBJECT, SLOT_OBJECTS, RATE),
    }


def test_given_fargate_worker_when_synthesised_then_task_role_consumes_the_namespace_only(
    example: Synthesis,
) -> None:
    template = example.templates["PailExample"]
    bucket = _bucket(template, "JobsBucket")
    # And its scale-in protection (test_fargate_worker.py): its cluster's tasks, nothing else.
    assert s3_statements(template, "ExportTaskTaskDefinitionTaskRole") == {
        # Under limits: slots taken and given back, rate tokens created (docs/limits.md).
        Statement((DELETE, GET, PUT), _objects(bucket, "exports/", *ALL_PREFIXES, SLOT_OBJECTS)),
        Statement((GET,), _objects(bucket, "exports/", PAUSE_MARKER, LIMITS_OBJECT)),
        Statement((PUT,), _objects(bucket, "exports/", RATE)),
        _listing(
            bucket, "exports/", *ALL_PREFIXES, PAUSE_MARKER, LIMITS_OBJECT, SLOT_OBJECTS, RATE
        ),
    }


def test_given_any_stack_when_synthesised_then_no_s3_statement_is_bucket_wide(
    example: Synthesis, variants: Synthesis
) -> None:
    checked = 0
    for synthesis in (example, variants):
        for template in synthesis.templates.values():
            for policy in template["Resources"].values():
                if policy["Type"] != "AWS::IAM::Policy":
                    continue
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    actions = statement["Action"]
                    actions = actions if isinstance(actions, list) else [actions]
                    if not any(action.startswith("s3:") for action in actions):
                        continue
                    checked += 1
                    assert not any(action.endswith("*") for action in actions), statement
                    resources = statement["Resource"]
                    for resource in resources if isinstance(resources, list) else [resources]:
                        rendered = render(resource)
                        assert rendered != "*", statement
                        if rendered.endswith("*"):
                            assert rendered.endswith(
                                tuple(
                                    f"/{p}*"
                                    for p in (
                                        *ALL_PREFIXES,
                                        DEDUP,
                                        SYSTEM,
                                        PAUSE_MARKER,
                                        SCHEDULE_DEFINITIONS,
                                        INDEX,
                                        LIMITS_OBJECT,
                                        SLOT_OBJECTS,
                                        RATE,
                                    )
                                )
                            ), rendered
                        else:
                            assert actions == [LIST] and "Condition" in statement, statement
    assert checked >= 15
