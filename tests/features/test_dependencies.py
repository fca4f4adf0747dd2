"""Dependencies on the real local S3 server: chains, fan-in, failure, cancel, redrive, fan-out.

``docs/dependencies.md``. Each test drives the workers with ``work_once`` in
this process, so the order in which handlers ran is the order of a list.
"""

from __future__ import annotations

from typing import Any

from pail import JobState, Pail, current_job
from tests.support.counting import RequestCounter


def _drain(pail: Pail, handler: Any) -> None:
    while pail.work_once(handler):
        pass
    pail.flush()


def _recording(ran: list[Any]) -> Any:
    def handler(payload: Any) -> Any:
        ran.append(payload)
        job = current_job()
        assert job is not None
        if payload.get("fail"):
            raise RuntimeError(f"export {payload['n']} failed")
        if payload.get("merge"):
            return {"merged": sorted(r["n"] for r in job.dependencies.values())}
        return {"n": payload["n"]}

    return handler


def test_given_chain_when_worked_then_each_runs_after_the_one_before(pail: Pail) -> None:
    ids = pail.enqueue_chain([{"n": 1}, {"n": 2}, {"n": 3}])
    states = [pail.status(job_id) for job_id in ids]
    assert [s.state if s else None for s in states] == [
        JobState.PENDING,
        JobState.WAITING,
        JobState.WAITING,
    ]
    assert pail.stats().waiting == 2 and pail.stats().pending == 1

    ran: list[Any] = []
    _drain(pail, _recording(ran))

    assert ran == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert [pail.result(job_id) for job_id in ids] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert pail.stats().waiting == 0


def test_given_fan_in_when_worked_then_continuation_runs_once_after_all_with_their_results(
    pail: Pail,
) -> None:
    flow = pail.enqueue_flow([{"n": n} for n in range(4)], then={"merge": True})
    waiting = pail.status(flow.then)
    assert waiting is not None and waiting.state is JobState.WAITING
    assert set(waiting.waiting_for) == set(flow.children)

    ran: list[Any] = []
    _drain(pail, _recording(ran))

    assert ran.count({"merge": True}) == 1 and ran[-1] == {"merge": True}
    assert pail.result(flow.then) == {"merged": [0, 1, 2, 3]}
    assert pail.results(flow.children) == {job: {"n": n} for n, job in enumerate(flow.children)}


def test_given_dead_lettered_dependency_then_dependents_are_dead_lettered_naming_it(
    connect: Any,
) -> None:
    pail: Pail = connect(max_retries=0)
    ids = pail.enqueue_chain([{"n": 1, "fail": True}, {"n": 2}, {"n": 3}])

    ran: list[Any] = []
    _drain(pail, _recording(ran))

    assert ran == [{"n": 1, "fail": True}]
    for job_id in ids[1:]:
        status = pail.status(job_id)
        assert status is not None and status.state is JobState.FAILED
        assert status.error is not None and status.error.type == "DependencyFailed"
    second = pail.status(ids[1])
    assert second is not None and second.error is not None and ids[0] in second.error.message
    assert pail.stats().failed == 3 and pail.stats().waiting == 0


def test_given_waiting_job_when_cancelled_then_it_never_runs_and_children_still_do(
    pail: Pail,
) -> None:
    flow = pail.enqueue_flow([{"n": 1}, {"n": 2}], then={"merge": True})

    assert pail.cancel(flow.then) is True
    status = pail.status(flow.then)
    assert status is not None and status.state is JobState.CANCELLED

    ran: list[Any] = []
    _drain(pail, _recording(ran))
    assert {"merge": True} not in ran and len(ran) == 2
    assert pail.stats().cancelled == 1 and pail.stats().waiting == 0


def test_given_cancelled_dependency_then_its_dependent_is_cancelled(pail: Pail) -> None:
    flow = pail.enqueue_flow([{"n": 1}, {"n": 2}], then={"merge": True})

    assert pail.cancel(flow.children[0]) is True

    status = pail.status(flow.then)
    assert status is not None and status.state is JobState.CANCELLED
    ran: list[Any] = []
    _drain(pail, _recording(ran))
    assert ran == [{"n": 2}]


def test_given_on_failure_wait_when_dependency_is_redriven_and_succeeds_then_dependent_runs(
    connect: Any,
) -> None:
    pail: Pail = connect(max_retries=0)
    flow = pail.enqueue_flow(
        [{"n": 1, "fail": True}, {"n": 2}], then={"merge": True}, on_failure="wait"
    )
    ran: list[Any] = []
    _drain(pail, _recording(ran))
    status = pail.status(flow.then)
    assert status is not None and status.state is JobState.WAITING
    assert status.waiting_for == (flow.children[0],)

    assert pail.redrive(flow.children[0]) == [flow.children[0]]

    def fixed(payload: Any) -> Any:
        return _recording(ran)({**payload, "fail": False})

    _drain(pail, fixed)
    assert pail.result(flow.then) == {"merged": [1, 2]}
    assert ran.count({"merge": True, "fail": False}) == 1


def test_given_handler_fan_out_when_worked_then_continuation_runs_after_children_and_parent(
    pail: Pail,
) -> None:
    ran: list[Any] = []

    def handler(payload: Any) -> Any:
        ran.append(payload)
        job = current_job()
        assert job is not None
        if payload.get("plan"):
            flow = job.fan_out([{"n": n} for n in range(3)], then={"merge": True})
            return {"n": -1, "then": flow.then}
        if payload.get("merge"):
            return {"merged": sorted(r["n"] for r in job.dependencies.values())}
        return {"n": payload["n"]}

    plan = pail.enqueue({"plan": True})
    _drain(pail, handler)

    then = pail.result(plan)["then"]
    assert pail.result(then) == {"merged": [-1, 0, 1, 2]}  # the parent's result is one of them
    assert ran.count({"merge": True}) == 1 and ran[-1] == {"merge": True}


def test_given_fan_in_then_requests_per_edge_are_a_small_constant_and_plain_jobs_pay_nothing(
    pail: Pail, counter: RequestCounter
) -> None:
    handler = _recording([])
    before = counter.total()
    for n in range(4):
        pail.enqueue({"n": n})
    _drain(pail, handler)
    plain = counter.total() - before

    before = counter.total()
    pail.enqueue_flow([{"n": n} for n in range(4)], then={"merge": True})
    _drain(pail, handler)
    flowed = counter.total() - before

    before = counter.total()
    pail.enqueue({"merge": True})  # the continuation's own cost as a plain job (reads none)
    _drain(pail, handler)
    one = counter.total() - before
    # Per edge: GET wait/ + PUT wait/ (met); per dependent: its waiting record, the
    # promotion's PUT and DELETE, and one GET per dependency result its handler reads.
    per_edge = (flowed - plain - one) / 4
    assert per_edge <= 4.0, (plain, flowed, one, per_edge)


def test_given_after_of_jobs_already_enqueued_when_they_succeed_then_the_reaper_pass_promotes(
    pail: Pail, counter: RequestCounter
) -> None:
    first = pail.enqueue({"n": 1})
    done = pail.enqueue({"n": 0})
    ran: list[Any] = []
    handler = _recording(ran)
    assert pail.work_once(handler)  # the oldest: {"n": 1}
    pail.flush()
    later = pail.enqueue({"merge": True}, after=[first, done])
    status = pail.status(later)
    assert status is not None and status.state is JobState.WAITING
    assert status.waiting_for == (done,)  # the one that had succeeded was met at enqueue

    assert pail.work_once(handler)  # {"n": 0}: it names no dependent, so nothing tells yet
    pail.flush()
    assert pail.work_once(handler) is False
    before = counter.total()
    report = pail.reap()
    assert report.dependencies is not None and report.dependencies.told == 1
    # LIST run/, LIST _pail/slots/ (limits), LIST _pail/schedules/, LIST wait/, GET it,
    # HEAD done/, GET+PUT it, PUT+DELETE
    assert counter.total() - before <= 10

    _drain(pail, handler)
    assert pail.result(later) == {"merged": [0, 1]}
    assert ran.count({"merge": True}) == 1


def test_given_after_of_a_dead_lettered_job_then_the_dependent_is_dead_lettered_at_enqueue(
    connect: Any,
) -> None:
    pail: Pail = connect(max_retries=0)
    doomed = pail.enqueue({"n": 1, "fail": True})
    _drain(pail, _recording([]))

    later = pail.enqueue({"merge": True}, after=[doomed])

    status = pail.status(later)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and doomed in status.error.message
