"""Fixtures for the infrastructure tests: each app is synthesised once per session.

``example`` is the app ``cdk.json`` runs (``infra/app.py``), with cdk-nag
attached, synthesised exactly as ``cdk synth`` does it. ``variants`` is one
more app whose stacks cover the options the example does not use. Tests read
the templates the synth wrote; none synthesises on its own.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .rehearsal import toolchain

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,19,20,21")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
# Before aws_cdk starts its jsii kernel: every Node process of these tests (the kernel,
# and the CDK CLI and kernels of the synths they run) gets one V8 helper thread.
os.environ["NODE_OPTIONS"] = toolchain.node_options(os.environ.get("NODE_OPTIONS", ""))

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "infra") not in sys.path:
    sys.path.insert(0, str(ROOT / "infra"))

from aws_cdk import Acknowledgment, App, Duration, Stack, Validations  # noqa: E402
from aws_cdk import aws_applicationautoscaling as appscaling  # noqa: E402
from aws_cdk import aws_ecs as ecs  # noqa: E402
from aws_cdk import aws_iam as iam  # noqa: E402
from aws_cdk import aws_lambda as lambda_  # noqa: E402
from aws_cdk import aws_s3 as s3  # noqa: E402
from aws_cdk import aws_sns as sns  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

import app as example_app  # noqa: E402
from pail_cdk import FargateWorkerMode, PailFargateWorker, PailQueue, PailWorkerFunction  # noqa: E402


@dataclass
class Synthesis:
    """What one synth wrote: templates, the validation report, acknowledgements."""

    outdir: Path
    error: str | None
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    acknowledgements: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)

    def template(self, stack: str) -> Template:
        return Template.from_json(self.templates[stack])

    def resources(self, stack: str, kind: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self.templates[stack]["Resources"]
        return {name: res for name, res in found.items() if res["Type"] == kind}


def synthesize(app: App, outdir: Path) -> Synthesis:
    """Synthesise ``app`` into ``outdir``; a failed validation is recorded, not raised."""
    try:
        app.synth()
        error = None
    except RuntimeError as exc:
        error = str(exc)
    result = Synthesis(outdir=outdir, error=error)
    for path in outdir.glob("*.template.json"):
        result.templates[path.name.removesuffix(".template.json")] = json.loads(path.read_text())
    report = outdir / "validation-report.json"
    if report.exists():
        result.report = json.loads(report.read_text())
    for path in outdir.glob("*.metadata.json"):
        for construct_path, entries in json.loads(path.read_text()).items():
            for entry in entries:
                if entry["type"] == "aws:cdk:acknowledged-rules":
                    result.acknowledgements.setdefault(construct_path, {}).update(entry["data"])
                elif entry["type"] == "aws:cdk:warning":
                    result.warnings.append(f"{construct_path}: {entry['data']}")
                elif entry["type"] == "aws:cdk:info":
                    result.infos.append(f"{construct_path}: {entry['data']}")
    return result


@pytest.fixture(scope="session")
def example(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """The example app, as ``cdk synth`` builds it, cdk-nag included."""
    outdir = tmp_path_factory.mktemp("example")
    return synthesize(example_app.build_app(outdir=str(outdir)), outdir)


@pytest.fixture(scope="session")
def example_template(example: Synthesis) -> Template:
    return example.template(example_app.STACK_NAME)


class GrantsStack(Stack):
    """A namespaced queue with adjusted bucket props, alarms to a topic, one role per grant."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Alarms")
        self.queue = PailQueue(
            self,
            "Queue",
            namespace="reports",
            bucket_props=s3.BucketProps(versioned=True),
            max_retries=None,
            visibility_timeout=Duration.seconds(90),
            result_ttl=Duration.days(3),
            dlq_retention=None,
            dedup_key_ttl=Duration.days(2),
            cors_allowed_origins=["https://app.example.com"],
            reaper_schedule=Duration.minutes(10),
            oldest_pending_alarm_threshold=Duration.minutes(30),
            alarm_topic=self.topic,
        )
        self.roles = {
            name: iam.Role(self, name, assumed_by=iam.AccountRootPrincipal())
            for name in (
                "Producer",
                "KeyedProducer",
                "Consumer",
                "Reader",
                "Status",
                "TaggedProducer",
                "Searcher",
            )
        }
        self.queue.grant_enqueue(self.roles["Producer"])
        self.queue.grant_enqueue_keyed(self.roles["KeyedProducer"])
        self.queue.grant_consume(self.roles["Consumer"])
        self.queue.grant_read_results(self.roles["Reader"])
        self.queue.grant_read_status(self.roles["Status"])
        self.queue.grant_enqueue(self.roles["TaggedProducer"], tags=True)
        self.queue.grant_search(self.roles["Searcher"])


class ImportedStack(Stack):
    """A sharded queue in an imported bucket, worked by an x86 Lambda using the public Powertools layer."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        bucket = s3.Bucket.from_bucket_name(self, "Existing", "existing-jobs-bucket")
        self.queue = PailQueue(self, "Queue", bucket=bucket, namespace="imports", shards=4)
        self.worker = PailWorkerFunction(
            self,
            "Worker",
            queue=self.queue,
            handler="report.handler",
            code=lambda_.Code.from_asset(str(example_app.HANDLERS)),
            architecture=lambda_.Architecture.X86_64,
            public_powertools_layer=True,
            reserved_concurrency=None,
            max_jobs=10,
            schedule=None,
        )


class OnceStack(Stack):
    """A Fargate worker in ``once`` mode: a task per enqueue event, and a schedule."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = PailQueue(self, "Queue", namespace="exports")
        self.worker = PailFargateWorker(
            self,
            "Task",
            queue=self.queue,
            handler="report:run",
            image=ecs.ContainerImage.from_registry("example/pail-worker:1"),
        )


class ScaledStack(Stack):
    """An auto scaling service on the default queue: never below one task, custom steps."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = PailQueue(self, "Queue", reaper_schedule=Duration.minutes(2))
        self.worker = PailFargateWorker(
            self,
            "Service",
            queue=self.queue,
            handler="report:run",
            image=ecs.ContainerImage.from_registry("example/pail-worker:1"),
            mode=FargateWorkerMode.SERVICE,
            min_tasks=1,
            max_tasks=10,
            scaling_steps=[
                appscaling.ScalingInterval(lower=3, change=1),
                appscaling.ScalingInterval(lower=50, change=4),
            ],
            scale_out_after=Duration.minutes(2),
            scale_in_after=Duration.minutes(15),
        )


class ServiceStack(Stack):
    """A Fargate worker as a long-running service of a fixed size."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = PailQueue(self, "Queue")
        self.worker = PailFargateWorker(
            self,
            "Service",
            queue=self.queue,
            handler="report:run",
            image=ecs.ContainerImage.from_registry("example/pail-worker:1"),
            mode=FargateWorkerMode.SERVICE,
            desired_count=2,
            max_jobs=100,
            time_budget=Duration.hours(1),
        )


@pytest.fixture(scope="session")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """One app with the ``GrantsStack``, ``ImportedStack``, ``OnceStack``, ``ScaledStack``
    and ``ServiceStack``."""
    outdir = tmp_path_factory.mktemp("variants")
    app = App(context=example_app.cdk_json_context(), outdir=str(outdir), analytics_reporting=False)
    GrantsStack(app, "Grants")
    ImportedStack(app, "Imported")
    OnceStack(app, "Once")
    ScaledStack(app, "Scaled")
    ServiceStack(app, "Service")
    return synthesize(app, outdir)


class ExpressStack(Stack):
    """A queue in a new S3 Express One Zone directory bucket, worked by a Lambda and a
    scaling Fargate service, with a producer and a result reader."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = PailQueue(
            self, "Jobs", express_zone_id="use1-az4", express_bucket_name="reports"
        )
        self.worker = PailWorkerFunction(
            self,
            "Worker",
            queue=self.queue,
            handler="report.handler",
            code=lambda_.Code.from_asset(str(example_app.HANDLERS)),
        )
        self.service = PailFargateWorker(
            self,
            "Service",
            queue=self.queue,
            handler="report:run",
            image=ecs.ContainerImage.from_registry("example/pail-worker:1"),
            mode=FargateWorkerMode.SERVICE,
            max_tasks=3,
        )
        self.roles = {
            name: iam.Role(self, name, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
            for name in ("Producer", "Reader")
        }
        self.queue.grant_enqueue(self.roles["Producer"])
        self.queue.grant_read_results(self.roles["Reader"])


class ImportedExpressStack(Stack):
    """A queue in an existing directory bucket, imported by its name."""

    def __init__(self, scope: App, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        bucket = s3.Bucket.from_bucket_name(self, "Existing", "jobs--use1-az4--x-s3")
        self.queue = PailQueue(self, "Queue", bucket=bucket, namespace="imports")
        # What a user does once they have configured the bucket's lifecycle themselves.
        Validations.of(self.queue).acknowledge(
            Acknowledgment(
                id="Annotation::pail:ImportedBucket",
                reason="the bucket's lifecycle rules and policy are managed by another stack",
            )
        )


@pytest.fixture(scope="session")
def express(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """S3 Express One Zone queues (``ExpressStack``, ``ImportedExpressStack``), cdk-nag attached."""
    outdir = tmp_path_factory.mktemp("express")
    app = App(context=example_app.cdk_json_context(), outdir=str(outdir), analytics_reporting=False)
    ExpressStack(app, "Express")
    ImportedExpressStack(app, "ImportedExpress")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return synthesize(app, outdir)


@pytest.fixture
def stack() -> Iterator[Stack]:
    """A fresh, empty stack for tests that only construct (never synthesise)."""
    yield Stack(App(context=example_app.cdk_json_context()), "Scratch")
