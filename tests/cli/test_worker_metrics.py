"""``pail work --metrics emf``: CloudWatch EMF records as JSON lines, parsed as CloudWatch would."""

from __future__ import annotations

import io
import json
import signal
from typing import Any

from pail import Pail, metrics_names
from pail.drain import JobReport, Outcome
from pail.emf import MAX_VALUES, EmfReporter
from pail.local import LocalS3
from tests.support.command import Invoke, LineReader, pail_script, process_env, start

ECS = {"ECS_CONTAINER_METADATA_URI_V4": "http://127.0.0.1:9/v4/task"}


def _records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"_aws"')]


def _check_shape(data: dict[str, Any], queue: str) -> set[str]:
    """What CloudWatch requires of a record; the names of the metrics it declares."""
    [directive] = data["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == metrics_names.NAMESPACE
    assert directive["Dimensions"] == [[metrics_names.DIMENSION_QUEUE]]
    assert data[metrics_names.DIMENSION_QUEUE] == queue
    assert isinstance(data["_aws"]["Timestamp"], int)
    names = {metric["Name"] for metric in directive["Metrics"]}
    assert all(name in data for name in names)  # every declared metric has its value
    return names


def test_given_three_jobs_when_work_once_emits_emf_then_one_record_counts_them_all(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}])
    pail.enqueue({"boom": True})  # double() raises on it: a failed attempt

    result = invoke(
        "work-once",
        bucket,
        "--handler",
        "tests.cli.handlers:double",
        "--max-jobs",
        "4",
        "--metrics",
        "emf",
        "--max-retries",
        "0",
    )

    assert result.exit_code == 0, result.stderr
    [data] = _records(result.stdout)
    names = _check_shape(data, metrics_names.DEFAULT_QUEUE_DIMENSION)
    assert names == set(metrics_names.WORKER_METRICS)  # the worker Lambda's metrics, all
    assert data[metrics_names.JOBS_PROCESSED] == 4
    assert data[metrics_names.JOBS_FAILED] == 1
    assert data[metrics_names.JOBS_DEAD_LETTERED] == 1
    assert len(data[metrics_names.JOB_DURATION]) == 4
    assert json.loads(result.stdout.splitlines()[-1])["processed"] == 4  # the summary stays last


def test_given_auto_when_inside_ecs_then_records_and_none_or_outside_ecs_then_no_record(
    invoke: Invoke, bucket: str
) -> None:
    handler = ("--handler", "tests.cli.handlers:double")

    in_ecs = invoke("work-once", bucket, *handler, env=ECS)
    switched_off = invoke("work-once", bucket, *handler, env={**ECS, "PAIL_METRICS": "none"})
    outside = invoke("work-once", bucket, *handler)
    forced = invoke("work-once", bucket, *handler, env={"PAIL_METRICS": "emf"})
    bad = invoke("work-once", bucket, *handler, env={"PAIL_METRICS": "prometheus"})

    assert len(_records(in_ecs.stdout)) == 1 and len(_records(forced.stdout)) == 1
    assert _records(switched_off.stdout) == [] and _records(outside.stdout) == []
    assert bad.exit_code == 2 and "PAIL_METRICS" in bad.stderr


def test_given_pail_work_when_it_serves_then_a_record_per_period_with_zeros_while_idle(
    s3_server: LocalS3, pail: Pail, bucket: str
) -> None:
    args = [
        pail_script(),
        "work",
        bucket,
        "--handler",
        "tests.cli.handlers:double",
        "--poll-interval",
        "0.2",
        "--metrics",
        "emf",
        "--metrics-every",
        "0.3",
    ]
    process = start(args, process_env(s3_server.env()))
    try:
        out = LineReader(process.stdout)  # type: ignore[arg-type]
        idle = json.loads(out.wait_for('"_aws"'))
        assert idle[metrics_names.JOBS_PROCESSED] == 0  # an idle minute is a zero, not a gap
        assert metrics_names.JOB_DURATION not in idle

        pail.enqueue({"n": 21})

        while True:  # bounded by wait_for's deadline
            data = json.loads(out.wait_for('"_aws"'))
            if data[metrics_names.JOBS_PROCESSED]:
                break
        assert data[metrics_names.JOBS_PROCESSED] == 1
        assert len(data[metrics_names.JOB_DURATION]) == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        summary = json.loads(out.rest().splitlines()[-1])
        assert summary["processed"] == 1 and summary["stop_reason"] == "signal"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()


def test_given_more_durations_than_emf_allows_when_reported_then_a_record_goes_out_early() -> None:
    stream = io.StringIO()
    reporter = EmfReporter("reports", every=3600, stream=stream)
    report = JobReport("job", 1, Outcome.SUCCEEDED, 0.25)

    for _ in range(MAX_VALUES + 50):
        reporter.settled(report)
    early = reporter.records
    reporter.close()

    records = _records(stream.getvalue())
    assert early == 1 and len(records) == 2
    assert [len(r[metrics_names.JOB_DURATION]) for r in records] == [MAX_VALUES, 50]
    assert sum(r[metrics_names.JOBS_PROCESSED] for r in records) == MAX_VALUES + 50
    assert {_check_shape(r, "reports") == set(metrics_names.WORKER_METRICS) for r in records} == {
        True
    }
