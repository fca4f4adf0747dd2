"""The Fargate/CLI runner in-process: loading handlers, limits, stop and signals, exit codes."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from pail import ConfigurationError, JobState, MemoryStore, Message, Pail
from pail.cli.exit_codes import EXIT_CONFIG, EXIT_ERROR, EXIT_OK, exit_code
from pail.drain import JobReport, ProcessLimits, drain
from pail.runner import RunSummary, load_handler, run
from pail.runner.__main__ import main
from tests.aws import job_handlers
from tests.support.waiting import wait_until


def memory_queue(jobs: int = 0) -> tuple[Pail, list[str]]:
    queue = Pail(MemoryStore("jobs"))
    return queue, [queue.enqueue({"n": n}) for n in range(jobs)]


# -- load_handler ------------------------------------------------------------------


def test_given_a_module_function_spec_when_loaded_then_the_function_is_returned() -> None:
    assert load_handler("tests.aws.job_handlers:double") is job_handlers.double


def test_given_a_lambda_style_spec_when_loaded_then_the_last_dot_separates_the_function() -> None:
    assert load_handler("tests.aws.job_handlers.double") is job_handlers.double


def test_given_a_worker_lambda_handler_when_loaded_then_it_is_unwrapped_to_its_run_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wrapped_jobs.py").write_text(
        "from pail import lambda_worker\n"
        "def run(payload):\n    return payload\n"
        "handler = lambda_worker(run)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    loaded = load_handler("wrapped_jobs:handler")

    assert loaded.__name__ == "run"
    assert loaded({"a": 1}) == {"a": 1}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nodots", "must look like 'package.module:function'"),
        (":run", "must look like 'package.module:function'"),
        ("no_such_module_anywhere:run", "no module named 'no_such_module_anywhere'"),
        ("tests.aws.job_handlers:missing", "has no attribute 'missing'"),
        ("tests.aws.job_handlers:__name__", "is a str, not a function"),
        ("tests.aws.job_handlers:two_arguments", "must take one argument"),
    ],
)
def test_given_a_bad_handler_spec_when_loaded_then_a_configuration_error_explains_it(
    spec: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_handler(spec)


def test_given_a_module_that_fails_to_import_when_loaded_then_the_error_names_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_jobs.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ConfigurationError, match=r"importing it failed.*no_such_dependency_xyz"):
        load_handler("broken_jobs:run")


# -- run -----------------------------------------------------------------------------


def test_given_three_jobs_when_run_once_then_one_job_is_processed() -> None:
    queue, _ = memory_queue(3)

    summary = run(queue, job_handlers.double, once=True, install_signal_handlers=False)

    assert summary == RunSummary(processed=1, succeeded=1, failed=0, stop_reason="max_jobs")
    assert queue.stats().pending == 2


def test_given_three_jobs_when_run_once_with_a_higher_max_then_it_drains_and_stops_empty() -> None:
    queue, ids = memory_queue(3)

    summary = run(queue, job_handlers.double, once=True, max_jobs=10, install_signal_handlers=False)

    assert (summary.processed, summary.stop_reason) == (3, "empty")
    assert [queue.result(i) for i in ids] == [{"doubled": 2 * n} for n in range(3)]


def test_given_an_async_handler_when_run_then_its_coroutine_is_awaited() -> None:
    queue, (job_id,) = memory_queue(1)

    async def doubles_later(payload: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return job_handlers.double(payload)

    summary = run(queue, doubles_later, once=True, install_signal_handlers=False)

    assert summary.succeeded == 1
    assert queue.result(job_id) == {"doubled": 0}


def test_given_a_spent_time_budget_when_run_then_nothing_is_claimed() -> None:
    queue, _ = memory_queue(1)

    summary = run(
        queue, job_handlers.double, once=True, time_budget=0, install_signal_handlers=False
    )

    assert (summary.processed, summary.stop_reason) == (0, "time_budget")
    assert queue.stats().pending == 1


def test_given_a_service_when_stop_is_set_then_it_finishes_the_job_and_claims_no_more() -> None:
    queue, _ = memory_queue(3)
    stop = threading.Event()

    def stops_the_service(payload: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return job_handlers.double(payload)

    summary = run(queue, stops_the_service, once=False, stop=stop, install_signal_handlers=False)

    assert (summary.processed, summary.succeeded, summary.stop_reason) == (1, 1, "stopped")
    assert queue.stats().pending == 2


def test_given_a_service_on_an_empty_queue_when_a_job_arrives_then_it_is_picked_up() -> None:
    queue, (first,) = memory_queue(1)
    stop = threading.Event()
    summaries: list[RunSummary] = []
    service = threading.Thread(
        target=lambda: summaries.append(
            run(queue, job_handlers.double, once=False, poll_interval=0.05, stop=stop)
        )
    )
    service.start()
    try:
        wait_until(lambda: queue.result(first) is not None)
        second = queue.enqueue({"n": 5})  # arrives while the service polls an empty queue
        wait_until(lambda: queue.result(second) is not None)
    finally:
        stop.set()
        service.join(30)

    assert (summaries[0].processed, summaries[0].stop_reason) == (2, "stopped")
    assert queue.result(second) == {"doubled": 10}


def test_given_a_job_that_outlives_the_grace_period_when_stopped_then_its_lease_is_released(
    gate: threading.Event,
) -> None:
    queue, (job_id,) = memory_queue(1)
    stop = threading.Event()

    def ignores_stop(payload: dict[str, Any]) -> None:
        stop.set()
        gate.wait(60)

    summary = run(
        queue, ignores_stop, once=True, stop=stop, grace_period=0.2, install_signal_handlers=False
    )

    assert (summary.processed, summary.released, summary.stop_reason) == (1, 1, "stopped")
    status = queue.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert status.error is not None and status.error.type == "LeaseReleased"
    assert "grace period" in status.error.message


def test_given_sigterm_during_a_job_when_the_job_ends_within_grace_then_it_completes_and_stops() -> (
    None
):
    queue, _ = memory_queue(2)
    previous = signal.getsignal(signal.SIGTERM)

    def signals_itself(payload: dict[str, Any]) -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGTERM)  # ECS stopping the task, mid-job
        return job_handlers.double(payload)

    summary = run(queue, signals_itself, once=True, max_jobs=5, grace_period=30)

    assert (summary.processed, summary.succeeded, summary.stop_reason) == (1, 1, "signal")
    assert queue.stats().pending == 1
    assert signal.getsignal(signal.SIGTERM) is previous


def test_given_a_stop_event_when_run_off_the_main_thread_then_no_signal_handler_is_touched() -> (
    None
):
    queue, _ = memory_queue(1)
    previous = signal.getsignal(signal.SIGTERM)
    results: list[RunSummary] = []
    worker = threading.Thread(
        target=lambda: results.append(run(queue, job_handlers.double, once=True))
    )

    worker.start()
    worker.join(30)

    assert results[0].succeeded == 1
    assert signal.getsignal(signal.SIGTERM) is previous


def test_given_max_jobs_below_one_when_run_then_it_is_a_configuration_error() -> None:
    queue, _ = memory_queue(1)

    with pytest.raises(ConfigurationError, match="max_jobs"):
        run(queue, job_handlers.double, once=True, max_jobs=0, install_signal_handlers=False)


# -- exit codes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "empty", "code"),
    [
        (RunSummary(1, 1, 0, "max_jobs"), 0, EXIT_OK),
        (RunSummary(1, 0, 1, "max_jobs"), 0, EXIT_OK),
        (RunSummary(0, 0, 0, "empty"), 0, EXIT_OK),
        (RunSummary(0, 0, 0, "empty"), 3, 3),
        (RunSummary(2, 2, 0, "empty"), 3, EXIT_OK),
        (RunSummary(1, 0, 1, "signal", released=1), 0, EXIT_OK),
        (RunSummary(0, 0, 0, "storage_error"), 0, EXIT_ERROR),
    ],
)
def test_given_a_run_summary_when_mapped_then_the_exit_code_is_documented_one(
    summary: RunSummary, empty: int, code: int
) -> None:
    assert exit_code(summary, empty=empty) == code


def test_given_no_command_when_the_module_runs_then_it_prints_usage_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == EXIT_CONFIG
    assert "usage" in capsys.readouterr().err


class ExplodingObserver:
    """An observer (logging, metrics, tracing) that fails as a job starts."""

    def claimed(self, message: Message) -> None:
        raise RuntimeError("tracing backend unavailable")

    def settled(self, report: JobReport) -> None:
        raise AssertionError("never reached")


def test_given_the_loop_fails_around_a_claimed_job_when_it_raises_then_the_job_is_released() -> (
    None
):
    queue, (job_id,) = memory_queue(1)
    limits = ProcessLimits(time_budget=None, grace_period=1, stop=None)

    with pytest.raises(RuntimeError, match="tracing backend"):
        drain(queue.claim, job_handlers.double, limits, observer=ExplodingObserver())

    status = queue.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    # The handler never started: the job went back as it was, its attempt not spent.
    assert (status.attempts, status.error) == (0, None)
