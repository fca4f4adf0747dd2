"""``Pail.purge`` of a queue with waiting jobs, on the real local S3 server (``docs/dependencies.md``).

A purge cancels every job that has not started: the pending ones and the
waiting ones alike, so nothing it leaves runs later when a running
dependency ends; the running job itself is never touched.
"""

from __future__ import annotations

from typing import Any

from pail import JobState, Pail


def test_given_waiting_jobs_when_purged_then_they_end_cancelled_and_only_the_running_job_runs(
    connect: Any,
) -> None:
    pail: Pail = connect()
    running = pail.enqueue({"n": "running"})
    message = pail.claim()
    assert message is not None and message.id == running
    late = pail.enqueue({"n": "late"}, after=[running])  # a late edge on the running job
    flow = pail.enqueue_flow([{"n": "child"}], then={"n": "then"})  # edges from birth
    behind = pail.enqueue({"n": "behind"}, after=[late])  # waits for a waiting job
    assert pail.stats().waiting == 3

    report = pail.purge()

    assert sorted(report.waiting) == sorted([late, flow.then, behind])
    assert sorted(report.cancelled) == sorted([late, flow.then, behind, *flow.children])
    assert running not in report.cancelled + report.skipped and report.complete
    message.complete({"n": "running"})
    pail.flush()
    ran: list[Any] = []
    while pail.work_once(ran.append):
        pass
    pail.reclaim()  # a pass over wait/ and run/: nothing is left for it
    while pail.work_once(ran.append):
        pass
    pail.flush()

    assert ran == []  # the running job's end promotes nothing: its dependent is cancelled
    for job_id in (late, flow.then, behind, *flow.children):
        status = pail.status(job_id)
        assert status is not None and status.state is JobState.CANCELLED, job_id
    status = pail.status(running)
    assert status is not None and status.state is JobState.DONE
    stats = pail.stats()
    assert (stats.waiting, stats.pending, stats.running) == (0, 0, 0)
    assert pail.purge().cancelled == []  # nothing left to purge


def test_given_a_limit_and_foreign_bytes_when_purging_waiting_jobs_then_it_stops_and_finishes(
    connect: Any,
) -> None:
    pail: Pail = connect()
    first = pail.enqueue({"n": 1})
    waiting = [pail.enqueue({"n": n}, after=[first]) for n in range(3)]
    garbage = pail.keys.wait("01J0000000000000000000000Z")
    pail.store.put(garbage, b"NaN")  # foreign bytes under wait/: reported, left alone

    partial = pail.purge(limit=2)
    rest = pail.purge()

    assert len(partial.cancelled) == 2 and not partial.complete
    assert sorted(partial.cancelled + rest.cancelled) == sorted([*waiting, first])
    assert rest.foreign == [garbage] and pail.store.get(garbage) is not None
    stats = pail.stats()
    assert (stats.waiting, stats.pending, stats.cancelled) == (1, 0, 4)  # stats counts the key
