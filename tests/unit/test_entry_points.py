"""Every entry point runs a job through the one loop, ``pail.drain``.

``Pail.work_once``, ``Pail.work``, the worker Lambda and the runner (which
``pail work``/``work-once`` and the Fargate task call; ``tests/cli/test_workers.py``
runs the commands themselves) must run the same handler the same way: an
``async def`` handler is awaited, and ``pail.current_job()`` names the job it
runs. Each entry point here gets the same ``async def`` handler, which reads
its job from ``current_job()`` and returns it; the result proves both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from pail import MemoryStore, Pail, current_job, lambda_worker
from pail.runner import run
from tests.support.handlers import whoami


def _work_once(queue: Pail) -> None:
    assert queue.work_once(whoami) is True


def _work(queue: Pail) -> None:
    assert queue.work(whoami, max_jobs=1, min_poll_interval=0.01, poll_interval=0.01) == 1


def _lambda(queue: Pail) -> None:
    summary = lambda_worker(whoami, pail=queue, max_jobs=1)({}, None)
    assert summary["succeeded"] == 1


def _runner_once(queue: Pail) -> None:
    assert run(queue, whoami, once=True, install_signal_handlers=False).succeeded == 1


def _runner_service(queue: Pail) -> None:
    summary = run(
        queue, whoami, once=False, max_jobs=1, poll_interval=0.01, install_signal_handlers=False
    )
    assert summary.succeeded == 1


ENTRY_POINTS: dict[str, Callable[[Pail], None]] = {
    "Pail.work_once": _work_once,
    "Pail.work": _work,
    "lambda_worker": _lambda,
    "runner work-once": _runner_once,
    "runner work": _runner_service,
}


@pytest.mark.parametrize("entry", ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_given_an_async_handler_reading_current_job_when_an_entry_point_runs_it_then_it_succeeds(
    entry: Callable[[Pail], None],
) -> None:
    queue = Pail(MemoryStore("jobs"))
    job_id = queue.enqueue({"n": 7})

    entry(queue)

    assert queue.result(job_id) == {"n": 7, "job": job_id, "attempt": 1}
    assert current_job() is None  # only inside a supervised handler


def test_given_a_stop_event_when_pail_work_runs_then_the_running_job_is_told_and_finishes() -> None:
    queue = Pail(MemoryStore("jobs"))
    job_id = queue.enqueue({"n": 1})
    stop = threading.Event()

    def cooperative(payload: dict[str, Any]) -> str:
        job = current_job()
        assert job is not None
        stop.set()  # as another thread would, to end the worker
        if not job.stopping.wait(30):
            raise AssertionError("the running job was never told to stop")
        return "checkpointed"

    processed = queue.work(cooperative, stop=stop, poll_interval=0.01, min_poll_interval=0.01)

    assert processed == 1
    assert queue.result(job_id) == "checkpointed"
