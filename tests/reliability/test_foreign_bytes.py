"""The foreign-bytes rule, whole: every hostile kind, in every prefix, on the real local server.

Anything read from the bucket that is not a valid pail object is quarantined
(dead-lettered with its raw bytes and the reason) or passed by with a logged
reason and a clear status; it never raises out of a worker loop, the
reaper, ``status``, ``stats``, ``dead_letters`` or ``redrive``
(docs/protocol.md, "Foreign bytes").
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pail import DecodeError, JobNotFoundError, JobState, Pail
from tests.reliability.conftest import Foreign
from tests.support.command import Invoke
from tests.support.hostile import (
    LEASE_BODIES,
    LETTER_BODIES,
    PAILQ_NAN,
    QUEUE_BODIES,
    hostile_id,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.s3

HOSTILE_ENTRIES = 100
GOOD_JOBS = 10


@dataclass(frozen=True, slots=True)
class _Planted:
    key: str
    quarantined: bool
    """True if a claim must dead-letter it; False for keys that name no job (passed by)."""


def _plant_hostile_queue(pail: Pail, foreign: Foreign, count: int) -> list[_Planted]:
    """``count`` hostile objects under ``queue/``, all sorting before any real job id.

    Every body of the catalogue in turn, and the key shapes: a malformed
    delayed key, a due delayed entry with a hostile body, a console folder
    and a nested key under an id-like folder.
    """
    shapes: list[Callable[[int], _Planted]] = []
    for hostile in QUEUE_BODIES:

        def plain(i: int, body: bytes = hostile.body) -> _Planted:
            key = pail.keys.queue(hostile_id(i))
            foreign(key, body)
            return _Planted(key, True)

        shapes.append(plain)

    def malformed_delayed_key(i: int) -> _Planted:
        key = pail.keys.queue(f"!soon-{hostile_id(i)}")
        foreign(key, b'{"payload": 1, "attempts": 0}')
        return _Planted(key, True)

    def delayed_hostile_body(i: int) -> _Planted:
        key = pail.keys.queue(f"!0000000000001-{hostile_id(i)}")
        foreign(key, PAILQ_NAN)
        return _Planted(key, True)

    def console_folder(i: int) -> _Planted:
        key = pail.keys.queue(f"{hostile_id(i)}/")
        foreign(key, b"")
        return _Planted(key, False)

    def nested_key(i: int) -> _Planted:
        key = pail.keys.queue(f"{hostile_id(i)}/report.json")
        foreign(key, b'{"payload": 1, "attempts": 0}')
        return _Planted(key, False)

    shapes += [malformed_delayed_key, delayed_hostile_body, console_folder, nested_key]
    foreign(pail.keys.prefix("queue/"), b"")  # the console's folder for the prefix itself
    return [shapes[i % len(shapes)](i) for i in range(count)]


def test_given_a_queue_whose_first_100_entries_are_hostile_when_a_worker_works_then_it_completes_every_good_job(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(max_retries=0)
    planted = _plant_hostile_queue(pail, foreign, HOSTILE_ENTRIES)
    good = [pail.enqueue({"n": n}) for n in range(GOOD_JOBS)]
    assert all(p.key < pail.keys.queue(min(good)) for p in planted)  # all ahead of the jobs

    stop = threading.Event()
    timer = threading.Timer(120, stop.set)
    timer.start()
    try:
        processed = pail.work(
            lambda p: {"twice": p["n"] * 2},
            max_jobs=GOOD_JOBS,
            stop=stop,
            min_poll_interval=0.01,
            poll_interval=0.05,
        )
    finally:
        timer.cancel()

    assert processed == GOOD_JOBS, f"stopped by the 120 s guard after {processed} jobs"
    assert [pail.result(job_id) for job_id in good] == [{"twice": 2 * n} for n in range(GOOD_JOBS)]
    quarantined = [p for p in planted if p.quarantined]
    letters = pail.dead_letters()
    assert len(letters) == len(quarantined) and all(letter.quarantined for letter in letters)
    assert all(letter.error is not None for letter in letters)
    passed_by = {p.key for p in planted if not p.quarantined} | {pail.keys.prefix("queue/")}
    left = {item.key for item in pail.store.list(pail.keys.prefix("queue/")).items}
    assert left == passed_by  # foreign keys that name no job are left alone, never run
    stats = pail.stats()
    assert (stats.pending, stats.running, stats.done, stats.failed) == (
        0,
        0,
        GOOD_JOBS,
        len(quarantined),
    )


def test_given_hostile_leases_of_every_kind_when_the_reaper_runs_then_it_still_reaps_the_dead_workers_job(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(visibility_timeout=1)
    hostile = {hostile_id(i): h for i, h in enumerate(LEASE_BODIES)}
    for job_id, h in hostile.items():
        foreign(pail.keys.run(job_id), h.body)
    # A hostile lease of a job that is pending all the same: the entry is the truth.
    shadowed = hostile_id(99)
    foreign(pail.keys.run(shadowed), b"")
    foreign(pail.keys.queue(shadowed), b'{"payload": {"n": 99}, "attempts": 0}')
    foreign(pail.keys.prefix("run/"), b"")
    nested = pail.keys.run("scratch/notes.txt")
    foreign(nested, b"someone's notes")
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None and message.id == job_id
    del message  # the worker dies: its heartbeat stops with the last reference
    gc.collect()

    reports = []

    def requeued() -> bool:
        reports.append(pail.reap())
        return any(job_id in r.requeued_ids for r in reports)

    wait_until(requeued, timeout=30, what="the dead worker's job to be requeued")

    quarantined = {i for r in reports for i in r.quarantined_ids}
    assert quarantined == set(hostile)
    letters = {letter.job_id: letter for letter in pail.dead_letters()}
    for hostile_job, h in hostile.items():
        assert letters[hostile_job].raw is not None, h.name
        status = pail.status(hostile_job)
        assert status is not None and status.state is JobState.FAILED, h.name
    assert letters[hostile_id(0)].raw == PAILQ_NAN.decode()
    assert reports[-1].skipped == 1  # the nested key, logged and left alone
    assert pail.store.head(nested) is not None
    assert pail.store.head(pail.keys.prefix("run/")) is not None
    # The shadowed job kept its pending entry and runs.
    seen: list[Any] = []

    def record(payload: Any) -> Any:
        seen.append(payload)
        return payload

    while pail.work_once(record):
        pass
    assert {"n": 99} in seen and {"n": 1} in seen


def test_given_hostile_objects_in_every_prefix_when_reading_then_every_reader_answers(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(max_retries=0)
    queued, waiting, running, done, dead = (hostile_id(i) for i in range(1, 6))
    foreign(pail.keys.queue(queued), QUEUE_BODIES[0].body)
    foreign(pail.keys.queue(f"!9999999999999-{waiting}"), b"\xff\xfe not json")
    foreign(pail.keys.run(running), b'{"payload": 1, "attempts": "x"}')
    foreign(pail.keys.done(done), b"", metadata={"pail-attempt": "many", "pail-outcome": "?"})
    foreign(pail.keys.dlq(dead), LETTER_BODIES[2].body)
    foreign(pail.keys.dedup("0" * 64), b"")
    for prefix in ("queue/", "run/", "done/", "dlq/", "keys/"):
        foreign(pail.keys.prefix(prefix), b"")

    statuses = {job_id: pail.status(job_id) for job_id in (queued, waiting, running, done, dead)}
    stats = pail.stats()
    letters = pail.dead_letters()
    redriven = pail.redrive(all=True)

    expected = {
        queued: JobState.PENDING,
        waiting: JobState.PENDING,
        running: JobState.RUNNING,
        done: JobState.DONE,  # a done/ object without pail's outcome: pailq 0.1.1's success
        dead: JobState.FAILED,
    }
    for job_id, state in expected.items():
        status = statuses[job_id]
        assert status is not None and status.state is state, job_id
    for job_id in (queued, waiting, running, dead):
        status = statuses[job_id]
        assert status is not None and status.error is not None, job_id  # says why
    # Each job is in one state: the delayed one is not pending too (pail.stats.STATES).
    assert (stats.pending, stats.delayed, stats.running, stats.done, stats.failed) == (
        1,
        1,
        1,
        1,
        1,
    )
    assert [letter.job_id for letter in letters] == [dead] and letters[0].quarantined
    assert redriven == []
    with pytest.raises(DecodeError, match="result is empty"):
        pail.result(done)


def test_given_hostile_objects_in_every_prefix_when_the_cli_reads_them_then_it_answers(
    invoke: Invoke, pail: Pail, foreign: Foreign, bucket: str
) -> None:
    queued, running, dead = hostile_id(1), hostile_id(2), hostile_id(3)
    foreign(pail.keys.queue(queued), PAILQ_NAN)
    foreign(pail.keys.run(running), b"")
    foreign(pail.keys.dlq(dead), b"")
    for prefix in ("queue/", "run/", "done/", "dlq/"):
        foreign(pail.keys.prefix(prefix), b"")

    for args in (
        ("status", bucket, queued),
        ("status", bucket, running),
        ("status", bucket, dead),
        ("stats", bucket),
        ("dlq", "list", bucket),
        ("dlq", "show", bucket, dead),
        ("dlq", "redrive", bucket, "--all"),
        ("reap", bucket),
    ):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
    unredrivable = invoke("dlq", "redrive", bucket, dead)
    assert unredrivable.exit_code == 1 and "cannot be redriven" in unredrivable.output


def test_given_a_pailq_nan_entry_when_cancelled_then_it_is_cancelled_without_an_error(
    pail: Pail, foreign: Foreign
) -> None:
    job_id = hostile_id(1)
    foreign(pail.keys.queue(job_id), PAILQ_NAN)

    assert pail.cancel(job_id) is True

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.CANCELLED
    assert pail.work_once(lambda p: p) is False


def test_given_hostile_waiting_records_when_dependencies_end_and_the_reaper_runs_then_all_answer(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    """Foreign bytes under ``wait/`` (docs/dependencies.md): logged and left alone, never raised."""
    pail = connect(max_retries=0)
    garbage = [hostile_id(i) for i in range(20, 20 + len(QUEUE_BODIES[:6]) + 2)]
    bodies = [b"NaN", b'{"payload": 1, "after": "x"}', *(h.body for h in QUEUE_BODIES[:6])]
    for job_id, body in zip(garbage, bodies, strict=True):
        foreign(pail.keys.wait(job_id), body)
    foreign(pail.keys.prefix("wait/"), b"")  # a console folder
    # Real jobs that name the garbage as their dependents: ending them tells it.
    told = pail.enqueue_many([{"n": n} for n in range(2)], then=garbage[:2])
    pail.enqueue({"n": 3}, after=[told[0]])  # and a late edge the reaper's pass looks at

    # The worker's claims reclaim too, and that pass reads wait/ with the reaper's Repairer
    # (each record once per ETag): a worker of its own, so the reaper's pass reads them first.
    worker = connect(max_retries=0, reclaim=False)
    while worker.work_once(lambda payload: payload):
        pass
    worker.flush()
    report = pail.reap()
    workers_pass = connect(max_retries=0).reclaim()  # a worker's reclaim pass meets them too
    statuses = [pail.status(job_id) for job_id in garbage]
    stats = pail.stats()

    assert report.dependencies is not None and report.dependencies.foreign == len(garbage)
    assert workers_pass.dependencies is not None
    assert workers_pass.dependencies.foreign == len(garbage)
    assert all(s is not None and s.state is JobState.WAITING and s.error for s in statuses)
    assert (stats.done, stats.pending, stats.waiting) == (
        2,
        1,
        len(garbage),
    )  # the late one promoted
    assert pail.work_once(lambda payload: payload)
    # Foreign bytes are no job to cancel: a clear error, and they stay as found.
    with pytest.raises(JobNotFoundError):
        pail.cancel(garbage[0])
    assert pail.store.get(pail.keys.wait(garbage[0])) is not None
