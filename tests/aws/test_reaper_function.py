"""The reaper Lambda: reaping, queue-depth metrics, and self-heal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from pail import JobState, ManualClock, MemoryStore, Pail
from pail.aws import reaper as reaper_module
from pail.aws.reaper import ReaperFunction
from pail.depth import measure_depth
from pail.local import LocalS3
from pail.protocol.claim import Claimer
from tests.support.clocks import ServerClock
from tests.support.counting import RequestCounter
from tests.support.lambdas import FakeContext, LogCapture, emf_records, metric_values
from tests.support.queues import make_client


class Invocations:
    """Records the worker invocations the reaper makes (a fake invoker, no Lambda client)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Mapping[str, Any]]] = []
        self._fail = fail

    def __call__(self, function_name: str, payload: Mapping[str, Any]) -> None:
        if self._fail:
            raise RuntimeError("AccessDenied: not allowed to invoke")
        self.calls.append((function_name, payload))


def crashed_claim(queue: Pail) -> str:
    """Claim a job the way a worker does, then "crash": nothing renews the lease."""
    claimer = Claimer(
        queue.store,
        queue.keys,
        visibility_timeout=queue.visibility_timeout,
        clock=ManualClock(),
        owner="crashed-worker",
    )
    lease = claimer.claim()
    assert lease is not None
    return lease.job_id


def test_given_pending_running_and_dead_jobs_when_the_reaper_runs_then_it_publishes_their_depth(
    connect: Callable[..., Pail], log_capture: LogCapture, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = connect(max_retries=0, queue="reports")
    dead = queue.enqueue({"n": 0})
    message = queue.claim()
    assert message is not None and message.id == dead
    message.fail(ValueError("broken"))
    queue.enqueue({"n": 1})
    running = queue.claim()
    assert running is not None
    queue.enqueue({"n": 2})
    queue.enqueue({"n": 3})
    reaper = ReaperFunction(pail=queue, logger=log_capture.logger, invoke_worker=Invocations())

    summary = reaper({"source": "aws.events", "detail-type": "Scheduled Event"}, FakeContext())

    assert summary["depth"] == {
        "pending": 2,
        "delayed": 0,
        "running": 1,
        "live_leases": 1,
        "dead_lettered": 1,
        "oldest_pending_age": summary["depth"]["oldest_pending_age"],
        "complete": True,
    }
    assert summary["reap"]["expired"] == 0
    records = emf_records(capsys.readouterr().out)
    assert len(records) == 1
    directive = records[0]["_aws"]["CloudWatchMetrics"][0]
    assert (directive["Namespace"], directive["Dimensions"]) == ("Pail", [["queue"]])
    assert records[0]["queue"] == "reports"
    assert metric_values(records, "PendingJobs") == [2]
    assert metric_values(records, "RunningJobs") == [1]
    assert metric_values(records, "LiveLeases") == [1]
    assert metric_values(records, "DeadLetteredJobs") == [1]
    assert metric_values(records, "ExpiredLeases") == [0]
    assert metric_values(records, "SelfHealInvocations") == [0]
    (age,) = metric_values(records, "OldestPendingAgeSeconds")
    assert 0 <= age < 120
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units["OldestPendingAgeSeconds"] == "Seconds"
    assert units["PendingJobs"] == "Count"
    running.complete()


def test_given_an_idle_queue_when_the_reaper_runs_then_it_costs_seven_listings(
    s3_server: LocalS3, bucket: str, log_capture: LogCapture
) -> None:
    counter = RequestCounter()
    # PAIL_SHARDS as PailQueue sets it: no read of the layout marker.
    queue = Pail.connect(bucket, client=counter.attach(make_client(s3_server)), shards=1)
    reaper = ReaperFunction(pail=queue, logger=log_capture.logger, invoke_worker=Invocations())

    reaper({}, FakeContext())

    # run/ fits in one page: the reaper never reads or writes where its walk stands.
    # run/, _pail/slots/ (concurrency slots to recover), _pail/schedules/,
    # wait/ (waiting jobs' late dependencies), and queue/, run/, dlq/ for the depth.
    assert dict(counter.by_operation) == {"ListObjectsV2": 7}


def test_given_an_expired_lease_when_the_reaper_runs_then_the_job_is_requeued_and_counted() -> None:
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(MemoryStore("jobs", now=server), visibility_timeout=30, max_retries=3)
    job_id = queue.enqueue({"n": 1})
    crashed_claim(queue)
    server.advance(32)  # past the visibility timeout plus the server clock's 1 s resolution
    reaper = ReaperFunction(pail=queue, logger=LogCapture().logger, invoke_worker=Invocations())

    summary = reaper({}, None)

    assert summary["reap"]["expired"] == 1
    assert summary["reap"]["requeued"] == 1
    status = queue.status(job_id)
    assert status is not None
    assert status.state is JobState.PENDING
    assert status.error is not None and status.error.type == "LeaseExpired"


def test_given_an_expired_lease_on_the_last_attempt_when_reaped_then_dead_lettered_is_published(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(MemoryStore("jobs", now=server), visibility_timeout=30, max_retries=0)
    job_id = queue.enqueue({"n": 1})
    crashed_claim(queue)
    server.advance(32)
    reaper = ReaperFunction(pail=queue, logger=LogCapture().logger, invoke_worker=Invocations())

    reaper({}, None)

    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "ExpiredLeases") == [1]
    assert metric_values(records, "JobsDeadLettered") == [1]
    assert metric_values(records, "DeadLetteredJobs") == [1]
    status = queue.status(job_id)
    assert status is not None and status.state is JobState.FAILED


def self_healing_reaper(
    queue: Pail, invocations: Invocations, clock: ManualClock | None = None
) -> ReaperFunction:
    return ReaperFunction(
        pail=queue,
        logger=LogCapture().logger,
        invoke_worker=invocations,
        worker_function="pail-worker",
        self_heal_after=60,
        clock=(clock or ManualClock()).monotonic,
    )


def test_given_a_job_waiting_with_no_worker_when_the_reaper_runs_then_it_invokes_the_worker_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(MemoryStore("jobs", now=server))
    queue.enqueue({"n": 1})
    server.advance(90)
    invocations = Invocations()
    clock = ManualClock()
    reaper = self_healing_reaper(queue, invocations, clock)

    first = reaper({}, None)
    clock.advance(30)
    second = reaper({}, None)  # within the 60 s cool-down: the first worker may still be starting

    assert first["self_heal"]["invoked"] is True
    assert second["self_heal"]["invoked"] is False
    assert len(invocations.calls) == 1
    function, payload = invocations.calls[0]
    assert function == "pail-worker"
    assert payload["source"] == "pail.reaper"
    assert "1 job(s) pending, the oldest for 90 s" in payload["reason"]
    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "SelfHealInvocations") == [1, 0]

    clock.advance(31)
    assert reaper({}, None)["self_heal"]["invoked"] is True
    assert len(invocations.calls) == 2


@pytest.mark.parametrize(
    ("waited", "running", "function"),
    [(30, False, "pail-worker"), (90, True, "pail-worker"), (90, False, None)],
    ids=["waited too little", "a worker holds a lease", "no worker function configured"],
)
def test_given_no_reason_to_heal_when_the_reaper_runs_then_it_invokes_nothing(
    waited: float, running: bool, function: str | None
) -> None:
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(MemoryStore("jobs", now=server), visibility_timeout=600)
    queue.enqueue({"n": 1})
    if running:
        queue.enqueue({"n": 2})
        crashed_claim(queue)  # a lease that has not expired: a worker is on it
    server.advance(waited)
    invocations = Invocations()
    reaper = ReaperFunction(
        pail=queue,
        logger=LogCapture().logger,
        invoke_worker=invocations,
        worker_function=function,
        self_heal_after=60,
    )

    summary = reaper({}, None)

    assert summary["self_heal"]["invoked"] is False
    assert invocations.calls == []


def test_given_an_invoke_that_fails_when_self_healing_then_it_is_logged_and_metrics_still_go_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ServerClock(datetime(2025, 1, 1, tzinfo=UTC))
    queue = Pail(MemoryStore("jobs", now=server))
    queue.enqueue({"n": 1})
    server.advance(90)
    logs = LogCapture()
    reaper = ReaperFunction(
        pail=queue,
        logger=logs.logger,
        invoke_worker=Invocations(fail=True),
        worker_function="pail-worker",
    )

    summary = reaper({}, None)

    assert summary["self_heal"]["invoked"] is False
    assert "AccessDenied" in summary["self_heal"]["reason"]
    assert any(r["message"] == "self-heal: could not invoke the worker" for r in logs.records())
    assert metric_values(emf_records(capsys.readouterr().out), "PendingJobs") == [1]


def test_given_the_environment_when_the_module_handler_runs_then_it_reaps_the_configured_queue(
    s3_server: LocalS3,
    bucket: str,
    connect: Callable[..., Pail],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {**s3_server.env(), "PAIL_BUCKET": bucket, "PAIL_QUEUE": "nightly"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(reaper_module, "_default", None)
    connect(queue="nightly").enqueue({"n": 1})

    summary = reaper_module.handler({}, FakeContext())

    assert summary["queue"] == "nightly"
    assert summary["depth"]["pending"] == 1
    assert summary["self_heal"]["function"] is None


def test_given_more_keys_than_pages_allow_when_depth_is_measured_then_it_is_a_lower_bound() -> None:
    queue = Pail(MemoryStore("jobs"))
    for n in range(5):
        queue.enqueue({"n": n})

    depth = measure_depth(queue.store, queue.keys, max_pages=2, page_size=2)

    assert (depth.pending, depth.complete) == (4, False)
    assert measure_depth(queue.store, queue.keys, max_pages=3, page_size=2).complete is True
