"""The example handler module the CDK app deploys (examples/handlers/report.py) runs as written."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from pail.runner import load_handler, run
from tests.support.lambdas import FakeContext

HANDLERS = Path(__file__).resolve().parents[2] / "examples" / "handlers"
_loads = itertools.count()

ROWS = [
    {"region": "eu-west", "product": "widget", "units": 3, "amount": 120.0},
    {"region": "us-east", "product": "gadget", "units": 1, "amount": 80.5},
    {"region": "eu-west", "product": "gadget", "units": 2, "amount": 161.0},
    {"region": "ap-south", "product": "doohickey", "units": 5, "amount": 25.25},
]


def fresh_report_module() -> ModuleType:
    """A new instance of report.py: its module-level handler caches its queue per instance."""
    spec = importlib.util.spec_from_file_location(f"report_{next(_loads)}", HANDLERS / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_given_sales_rows_when_the_report_runs_then_it_totals_them_by_region_and_product() -> None:
    report = fresh_report_module()

    result: dict[str, Any] = report.run({"report_id": "q2", "currency": "EUR", "rows": ROWS})

    assert result["report_id"] == "q2"
    assert (result["rows"], result["units"], result["total"]) == (4, 11, 386.75)
    assert result["by_region"] == {"ap-south": 25.25, "eu-west": 281.0, "us-east": 80.5}
    assert result["top_products"] == [
        {"product": "gadget", "revenue": 241.5},
        {"product": "widget", "revenue": 120.0},
        {"product": "doohickey", "revenue": 25.25},
    ]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"rows": []}, "payload needs 'report_id'"),
        ({"report_id": "q2", "rows": [{"region": "eu"}]}, "row 1 is not a sales row"),
    ],
)
def test_given_a_bad_payload_when_the_report_runs_then_it_says_what_is_wrong(
    payload: dict[str, Any], message: str
) -> None:
    report = fresh_report_module()

    with pytest.raises(report.ReportError, match=message):
        report.run(payload)


def test_given_the_deployed_lambda_environment_when_report_handler_is_invoked_then_it_builds_it(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {**s3_server.env(), "PAIL_BUCKET": bucket}.items():
        monkeypatch.setenv(name, value)
    queue = connect()
    good = queue.enqueue({"report_id": "q2", "rows": ROWS})
    bad = queue.enqueue({"report_id": "q3"})
    report = fresh_report_module()

    summary = report.handler(
        {"source": "aws.events", "detail-type": "Scheduled Event"}, FakeContext()
    )

    assert summary["succeeded"] == 1
    assert queue.result(good)["total"] == 386.75
    status = queue.status(bad)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == "ReportError"


def test_given_the_fargate_handler_spec_when_loaded_then_it_runs_the_same_report(
    connect: Callable[..., Pail], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(HANDLERS))
    queue = connect()
    job_id = queue.enqueue({"report_id": "q2", "rows": ROWS})

    summary = run(queue, load_handler("report:run"), once=True, install_signal_handlers=False)

    assert summary.succeeded == 1
    assert queue.result(job_id)["top_products"][0] == {"product": "gadget", "revenue": 241.5}
