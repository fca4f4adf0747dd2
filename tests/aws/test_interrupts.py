"""A handler's KeyboardInterrupt or SystemExit (issue 23, item 10).

Under the library's entry points (``work_once``, ``work``) the exception goes
to the caller and the job goes back unstarted: pending, no attempt spent, as
before the one job loop. The deployed entry points decide for themselves: the
worker Lambda and ``pail work``/``work-once`` count it as the attempt's
failure and go on (one bad job never ends a worker), while a real Ctrl-C
reaches ``pail work`` as a signal, which stops it gracefully.
"""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pail import JobState, Pail
from pail.aws.lambda_worker import lambda_worker
from pail.drain import current_job
from pail.runner import run
from tests.support.lambdas import FakeContext, LogCapture

INTERRUPTS = [KeyboardInterrupt(), SystemExit(3)]


def _interrupting(exc: BaseException) -> Callable[[Any], Any]:
    def handler(payload: Any) -> Any:
        raise exc

    return handler


def _pending_unspent(pail: Pail, job_id: str) -> None:
    status = pail.status(job_id)
    assert status is not None
    assert status.state is JobState.PENDING
    assert status.attempts == 0
    assert status.error is None


@pytest.mark.parametrize("exc", INTERRUPTS, ids=lambda e: type(e).__name__)
def test_given_handler_that_raises_an_interrupt_when_work_once_then_it_propagates_and_the_job_is_pending_unspent(
    connect: Callable[..., Pail], exc: BaseException
) -> None:
    pail = connect(max_retries=0)
    job_id = pail.enqueue({"n": 1})

    with pytest.raises(type(exc)):
        pail.work_once(_interrupting(exc))

    _pending_unspent(pail, job_id)
    assert pail.work_once(lambda payload: "ran") is True  # claimable at once, first attempt
    assert pail.result(job_id) == "ran"


@pytest.mark.parametrize("exc", INTERRUPTS, ids=lambda e: type(e).__name__)
def test_given_handler_that_raises_an_interrupt_when_working_then_work_stops_and_the_job_is_pending_unspent(
    connect: Callable[..., Pail], exc: BaseException
) -> None:
    pail = connect(max_retries=0)
    job_id = pail.enqueue({"n": 1})
    stop = threading.Event()  # never set: only the interrupt ends work()

    with pytest.raises(type(exc)):
        pail.work(_interrupting(exc), stop=stop, poll_interval=0.1, min_poll_interval=0.05)

    _pending_unspent(pail, job_id)


def test_given_ctrl_c_while_a_handler_runs_when_work_once_then_it_propagates_and_the_job_is_pending_unspent(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    job_id = pail.enqueue({"n": 1})
    told_to_stop: list[bool] = []
    woke = threading.Event()

    def slow(payload: Any) -> Any:
        job = current_job()
        assert job is not None
        _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread
        told_to_stop.append(job.stopping.wait(30))
        woke.set()
        return "finished anyway"

    with pytest.raises(KeyboardInterrupt):
        pail.work_once(slow)

    assert woke.wait(30) and told_to_stop == [True]  # the abandoned handler was told to stop
    _pending_unspent(pail, job_id)
    assert pail.result(job_id) is None  # the abandoned handler's return is discarded


@pytest.mark.parametrize("exc", INTERRUPTS, ids=lambda e: type(e).__name__)
def test_given_handler_that_raises_an_interrupt_when_the_runner_runs_it_then_the_attempt_fails_and_it_goes_on(
    connect: Callable[..., Pail], exc: BaseException
) -> None:
    pail = connect(max_retries=0)
    bad = pail.enqueue({"bad": True})
    good = pail.enqueue({"bad": False})

    def handler(payload: Any) -> Any:
        if payload["bad"]:
            raise exc
        return "ok"

    summary = run(pail, handler, once=True, max_jobs=2, install_signal_handlers=False)

    assert (summary.processed, summary.failed, summary.succeeded) == (2, 1, 1)
    status = pail.status(bad)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == type(exc).__name__
    assert pail.result(good) == "ok"


@pytest.mark.parametrize("exc", INTERRUPTS, ids=lambda e: type(e).__name__)
def test_given_handler_that_raises_an_interrupt_when_the_lambda_runs_it_then_the_attempt_fails_and_it_goes_on(
    connect: Callable[..., Pail], log_capture: LogCapture, exc: BaseException
) -> None:
    pail = connect(max_retries=0)
    bad = pail.enqueue({"bad": True})
    good = pail.enqueue({"bad": False})

    def handler(payload: Any) -> Any:
        if payload["bad"]:
            raise exc
        return "ok"

    summary = lambda_worker(handler, pail=pail, logger=log_capture.logger)({}, FakeContext())

    assert (summary["processed"], summary["failed"], summary["succeeded"]) == (2, 1, 1)
    status = pail.status(bad)
    assert status is not None and status.state is JobState.FAILED
    assert pail.result(good) == "ok"
