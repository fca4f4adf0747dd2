"""S3 fails while a job's outcome is recorded: ``pail work-once`` exits 1 and the Lambda invocation fails.

S3 becomes unreachable (a proxy in front of the local server resets every
connection) while the handler runs, so its result cannot be written. The job
is not lost: its lease stays until it expires and the reaper retries it. But
the orchestrator must hear of it: ECS from the exit code, Lambda from a failed
invocation (its retry and ``Errors`` metric).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pail import JobState, Pail
from pail.aws.lambda_worker import lambda_worker
from pail.errors import StorageError
from pail.local import LocalS3
from tests.support.command import Spawn, pail_script, process_env
from tests.support.lambdas import FakeContext, LogCapture, emf_records, metric_values
from tests.support.scripted_proxy import Action, ScriptedProxy, connect_through, forward_all
from tests.support.waiting import wait_until

TIMEOUT = 120


def unreachable(request: object) -> Action:
    return Action.DROP_BEFORE


def test_given_s3_unreachable_when_work_once_records_the_result_then_it_exits_1_and_says_why(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    tmp_path: Path,
    spawn: Spawn,
) -> None:
    queue = connect()
    started, go = tmp_path / "started", tmp_path / "go"
    job_id = queue.enqueue({"started": str(started), "go": str(go), "wait": TIMEOUT})
    process = spawn(
        [
            pail_script(),
            "work-once",
            bucket,
            "--handler",
            "tests.aws.job_handlers:slow",
            "--endpoint-url",
            proxy.endpoint_url,
        ],
        process_env(s3_server.env()),
    )
    wait_until(started.exists, TIMEOUT)

    proxy.script = unreachable
    go.write_text("go")
    out, err = process.communicate(timeout=TIMEOUT)

    assert process.returncode == 1, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["processed"], summary["succeeded"], summary["unrecorded"]) == (1, 0, 1)
    assert summary["stop_reason"] == "storage_error"
    assert summary["error"]
    assert "S3 kept failing" in err
    proxy.script = forward_all
    status = queue.status(job_id)  # not lost: the lease waits for the reaper
    assert status is not None and (status.state, status.attempts) == (JobState.RUNNING, 1)


def test_given_s3_unreachable_when_the_lambda_records_the_result_then_the_invocation_fails(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    proxy: ScriptedProxy,
    log_capture: LogCapture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    job_id = connect().enqueue({"n": 1})
    through_proxy = connect_through(proxy, bucket)
    ran = threading.Event()

    def cut_off(payload: dict[str, Any]) -> dict[str, Any]:
        proxy.script = unreachable
        ran.set()
        return {"n": payload["n"]}

    handler = lambda_worker(cut_off, pail=through_proxy, logger=log_capture.logger)

    with pytest.raises(StorageError):
        handler({}, FakeContext())

    assert ran.is_set()
    records = emf_records(capsys.readouterr().out)  # published before the invocation failed
    assert metric_values(records, "JobsProcessed") == [1]
    assert metric_values(records, "JobsFailed") == [0]
    finished = [r for r in log_capture.records() if r["message"] == "worker finished"]
    assert finished and finished[0]["unrecorded"] == 1
    proxy.script = forward_all
    status = connect().status(job_id)
    assert status is not None and status.state is JobState.RUNNING
