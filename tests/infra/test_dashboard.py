"""PailDashboard in the example app: every widget reads a metric the runtime really emits.

The pail metrics on the dashboard are checked against the EMF records the
runtime's own entry points print (the worker Lambda, the reaper Lambda and
``pail work``'s reporter, each run once here on a ``MemoryStore``), so a metric
renamed in the runtime but not on the dashboard fails this test, not the
dashboard in the console. The AWS metrics are checked against the resources
they must name.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_cloudwatch as cloudwatch

from pail import MemoryStore, Pail, metrics_names
from pail.aws.lambda_worker import lambda_worker
from pail.aws.reaper import ReaperFunction
from pail.emf import EmfReporter
from pail.runner import run
from pail_cdk import PailDashboard, PailQueue
from pail_cdk.nag import render_for_nag
from tests.support.lambdas import FakeContext, LogCapture, emf_records

from .conftest import Synthesis
from .helpers import logical_id

STACK = "PailExample"


def dashboard_body(synthesis: Synthesis, stack: str = STACK) -> dict[str, Any]:
    """The one dashboard's body as JSON, each reference rendered as cdk-nag names it (``<Id.Attr>``)."""
    (dashboard,) = synthesis.resources(stack, "AWS::CloudWatch::Dashboard").values()
    joined = dashboard["Properties"]["DashboardBody"]["Fn::Join"]
    parts = [part if isinstance(part, str) else render_for_nag(part) for part in joined[1]]
    assert all(isinstance(part, str) for part in parts), parts
    body: dict[str, Any] = json.loads("".join(cast(list[str], parts)))
    return body


def sections(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The metric widgets under each queue's heading, by the queue dimension it names."""
    found: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] | None = None
    for widget in body["widgets"]:
        if widget["type"] == "text":
            queue = widget["properties"]["markdown"].split("`")[1]
            current = found.setdefault(queue, [])
        else:
            assert current is not None, "a metric widget above the first heading"
            current.append(widget)
    return found


def metrics_of(widget: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """``(namespace, name, dimensions)`` of every metric a widget plots (expressions aside)."""
    found = []
    for line in widget["properties"]["metrics"]:
        if isinstance(line[0], dict):
            continue  # a math expression: its inputs are metrics of the same widget
        fields = line[:-1] if isinstance(line[-1], dict) else line
        namespace, name, *pairs = fields
        found.append((namespace, name, dict(zip(pairs[::2], pairs[1::2], strict=True))))
    return found


@pytest.fixture
def emitted(capsys: pytest.CaptureFixture[str]) -> set[str]:
    """Every metric name the runtime's entry points emit, read from their EMF records."""
    queue = Pail(MemoryStore("jobs"), shards=1)
    queue.enqueue({"n": 1})
    lambda_worker(lambda payload: payload, pail=queue, logger=LogCapture().logger)(
        {}, FakeContext()
    )
    reaper = ReaperFunction(pail=queue, logger=LogCapture().logger, invoke_worker=lambda *_: None)
    reaper({}, FakeContext())
    queue.enqueue({"n": 2})
    reporter = EmfReporter("", every=3600)  # pail work's, on a Fargate task
    run(queue, lambda payload: payload, once=True, install_signal_handlers=False, observer=reporter)
    reporter.close()
    names = {
        metric["Name"]
        for record in emf_records(capsys.readouterr().out)
        for directive in record["_aws"]["CloudWatchMetrics"]
        for metric in directive["Metrics"]
    }
    assert metrics_names.JOB_DURATION in names and metrics_names.LIVE_LEASES in names
    return names


def test_given_the_example_app_when_synthesised_then_its_dashboard_has_a_section_per_queue(
    example: Synthesis,
) -> None:
    found = sections(dashboard_body(example))

    assert list(found) == ["_default", "exports"]
    titles = {queue: [w["properties"]["title"] for w in ws] for queue, ws in found.items()}
    shared = ["Backlog", "Jobs per minute", "Dead letters", "Leases"]
    assert titles["_default"] == [*shared, "Worker Lambda", "Reaper"]
    assert titles["exports"] == [*shared, "Fargate service", "Reaper"]


def test_given_the_dashboard_when_read_then_every_pail_metric_is_one_the_runtime_emits(
    example: Synthesis, emitted: set[str]
) -> None:
    declared = {*metrics_names.REAPER_METRICS, *metrics_names.WORKER_METRICS}
    plotted: set[str] = set()
    for queue, widgets in sections(dashboard_body(example)).items():
        for widget in widgets:
            for namespace, name, dimensions in metrics_of(widget):
                if namespace != metrics_names.NAMESPACE:
                    continue
                assert name in emitted, f"{widget['properties']['title']}: {name} is never emitted"
                assert name in declared
                assert dimensions == {metrics_names.DIMENSION_QUEUE: queue}
                plotted.add(name)

    wanted = {
        metrics_names.PENDING_JOBS,
        metrics_names.OLDEST_PENDING_AGE_SECONDS,
        metrics_names.JOBS_PROCESSED,
        metrics_names.JOBS_FAILED,
        metrics_names.DEAD_LETTERED_JOBS,
        metrics_names.JOBS_DEAD_LETTERED,
        metrics_names.LIVE_LEASES,
    }
    assert wanted <= plotted


def test_given_the_dashboard_when_read_then_its_aws_metrics_name_the_workers_and_reapers(
    example: Synthesis,
) -> None:
    template = example.templates[STACK]
    worker = logical_id(template, "AWS::Lambda::Function", "ReportWorkerFunction")
    reapers = {
        "_default": logical_id(template, "AWS::Lambda::Function", "JobsReaper"),
        "exports": logical_id(template, "AWS::Lambda::Function", "ExportsReaper"),
    }
    cluster = logical_id(template, "AWS::ECS::Cluster", "ExportTaskCluster")
    service = logical_id(template, "AWS::ECS::Service", "ExportTaskService")
    found = sections(dashboard_body(example))

    def plotted(queue: str, title: str) -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
        (widget,) = [w for w in found[queue] if w["properties"]["title"] == title]
        return {(ns, name, tuple(sorted(dims.items()))) for ns, name, dims in metrics_of(widget)}

    def function_metrics(function: str, *names: str) -> set[Any]:
        return {("AWS/Lambda", name, (("FunctionName", f"<{function}>"),)) for name in names}

    assert plotted("_default", "Worker Lambda") == function_metrics(
        worker, "Invocations", "Errors", "Throttles", "Duration"
    )
    tasks = (("ClusterName", f"<{cluster}>"), ("ServiceName", f"<{service}.Name>"))
    assert plotted("exports", "Fargate service") == {
        ("ECS/ContainerInsights", "RunningTaskCount", tasks),
        ("ECS/ContainerInsights", "DesiredTaskCount", tasks),
    }
    for queue, reaper in reapers.items():
        lambda_side = {m for m in plotted(queue, "Reaper") if m[0] == "AWS/Lambda"}
        assert lambda_side == function_metrics(reaper, "Invocations", "Errors")


def test_given_the_dashboard_when_read_then_each_expression_uses_metrics_of_its_widget(
    example: Synthesis,
) -> None:
    for widgets in sections(dashboard_body(example)).values():
        for widget in widgets:
            lines = widget["properties"]["metrics"]
            ids = {
                line[-1]["id"] for line in lines if isinstance(line[-1], dict) and "id" in line[-1]
            }
            for line in lines:
                if isinstance(line[0], dict):
                    used = {
                        w
                        for w in line[0]["expression"]
                        .replace(",", " ")
                        .replace("(", " ")
                        .replace(")", " ")
                        .split()
                        if w.isidentifier() and w != "FILL"
                    }
                    assert used and used <= ids, (widget["properties"]["title"], used, ids)


def test_given_an_existing_dashboard_and_a_name_when_constructed_then_it_is_refused() -> None:
    stack = Stack(App(), "Refused")
    existing = cloudwatch.Dashboard(stack, "Mine")

    with pytest.raises(ValueError, match="existing dashboard or dashboard_name, not both"):
        PailDashboard(
            stack, "Dashboard", queue=cast(PailQueue, None), dashboard=existing, dashboard_name="x"
        )
