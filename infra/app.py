"""The example app that ``cdk synth`` / ``cdk deploy`` run (see ``cdk.json``).

It deploys what the README describes:

* ``Jobs``: a ``PailQueue`` (bucket, reaper, alarms) worked by a Lambda
  function running ``examples/handlers/report.py``;
* ``Exports``: a second queue in the same bucket, under the ``exports``
  namespace, worked by a Fargate service whose image ``worker_image`` builds
  from the same handler folder. It scales on the queue's metrics from zero
  tasks (nothing runs while the queue is idle) up to four, and an enqueue
  wakes it from zero at once;
* ``Dashboard``: a CloudWatch dashboard with a section per queue (backlog,
  jobs per minute, dead letters, leases, the workers, the reaper).

cdk-nag's AWS Solutions checks run on every synth; a finding that is not
acknowledged (next to its resource, with a reason) fails the synth.

``build_app()`` is what the tests call, with the same ``cdk.json`` context, so
a test synth and a CLI synth produce the same templates.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,19,20,21")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aws_cdk import App, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from pail_cdk import (
    PailDashboard,
    PailFargateWorker,
    PailQueue,
    PailWorkerFunction,
    worker_image,
)

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ROOT / "examples" / "handlers"
STACK_NAME = "PailExample"


def cdk_json_context(root: Path = ROOT) -> dict[str, Any]:
    """The ``context`` of ``cdk.json``: feature flags and CLI settings."""
    context: dict[str, Any] = json.loads((root / "cdk.json").read_text())["context"]
    return context


class PailExampleStack(Stack):
    """A Lambda-worked queue and a Fargate-worked queue sharing one bucket."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(
            scope, construct_id, description="pail example: job queues in one S3 bucket"
        )
        self.jobs = PailQueue(self, "Jobs")
        # In force after `cdk deploy`: the reaper writes it into the bucket on its first run.
        self.jobs.add_schedule(
            "nightly-report",
            {
                "report_id": "nightly",
                "rows": [{"region": "EU", "product": "pail", "amount": 1.0, "units": 1}],
            },
            cron="0 2 * * *",
            timezone="Europe/Berlin",
        )
        self.worker = PailWorkerFunction(
            self,
            "ReportWorker",
            queue=self.jobs,
            handler="report.handler",
            code=lambda_.Code.from_asset(str(HANDLERS), exclude=["__pycache__"]),
        )
        self.exports = PailQueue(self, "Exports", bucket=self.jobs.bucket, namespace="exports")
        self.fargate = PailFargateWorker(
            self,
            "ExportTask",
            queue=self.exports,
            handler="report:run",
            image=worker_image(HANDLERS),
            mode="service",
            min_tasks=0,
            max_tasks=4,
        )
        self.dashboard = PailDashboard(
            self, "Dashboard", queue=self.jobs, worker_function=self.worker
        )
        self.dashboard.add_queue(self.exports, fargate_worker=self.fargate)


def build_app(outdir: str | None = None) -> App:
    """The example app with the ``cdk.json`` context and cdk-nag attached (not yet synthesised)."""
    # analytics_reporting=False matches `"versionReporting": false` in cdk.json.
    app = App(context=cdk_json_context(), outdir=outdir, analytics_reporting=False)
    PailExampleStack(app, STACK_NAME)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
