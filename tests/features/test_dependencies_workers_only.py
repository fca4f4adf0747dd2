"""A late edge (``after=`` of a job that already runs) on a queue served by workers alone.

No reaper runs here: only the workers' reclaim pass (``pail.protocol.reclaim``,
once per visibility timeout) can promote the dependent, as 0.1.1 deployments
are workers and nothing else (``docs/dependencies.md``, ``docs/upgrading.md``).
"""

from __future__ import annotations

from typing import Any

from pail import JobState, Pail
from tests.support.waiting import wait_until

# Short, so the worker's next pass is due soon; the test waits on progress, not on it.
VT = 2.0


def test_given_workers_only_when_after_names_a_running_job_then_it_runs_after_it_exactly_once(
    connect: Any,
) -> None:
    worker: Pail = connect(visibility_timeout=VT, reclaim=True)
    producer: Pail = connect(reclaim=False)
    ran: list[Any] = []
    first = producer.enqueue({"n": "a"})
    message = worker.claim()  # this claim's reclaim pass ran before the dependent existed
    assert message is not None and message.id == first

    later = producer.enqueue({"n": "b"}, after=[first])
    status = producer.status(later)
    assert status is not None and status.state is JobState.WAITING
    assert status.waiting_for == (first,)  # late: the running job's record names no dependent
    ran.append(message.payload)
    message.complete({"n": "a"})
    worker.flush()

    def handler(payload: Any) -> Any:
        ran.append(payload)
        return payload

    def worked() -> bool:
        worker.work_once(handler)  # each claim runs the reclaim pass once it is due
        return producer.result(later) is not None

    wait_until(worked, timeout=180, what="the dependent promoted by a worker's reclaim pass")
    while worker.work_once(handler):
        pass
    worker.flush()

    assert ran == [{"n": "a"}, {"n": "b"}]  # b after a, each once
    assert producer.stats().waiting == 0
