"""The known-bad model: pailq 0.1.1's protocol, ported step by step into the simulator.

It exists to prove that the harness can fail. Its steps, as MISSION.md and
the 0.1.1 description give them:

* **enqueue:** PUT ``queue/{id}`` (``{"payload", "attempts": 0}``);
* **claim:** LIST all of ``queue/`` page by page, then for each key, oldest
  first: GET ``queue/{id}``, PUT ``run/{id}`` create-only (412: next key),
  DELETE ``queue/{id}`` unconditionally;
* **heartbeat:** PUT ``run/{id}`` unconditionally every ``visibility_timeout / 3``;
* **complete:** PUT ``done/{id}``, DELETE ``run/{id}``, both unconditional;
* **fail:** PUT ``queue/{id}`` with one more attempt (or ``dlq/{id}`` once
  retries are spent), DELETE ``run/{id}``;
* **reclaim:** LIST ``run/``; a lease whose LastModified is older than the
  visibility timeout *by the reclaimer's own wall clock* is put back with a
  create-only PUT ``queue/{id}`` (412: skip it), then ``run/{id}`` is deleted.

Two of its bugs must show: the **stuck job** (a crash between the claim's
PUT ``run/`` and its DELETE ``queue/`` leaves both objects, and from then on
every claim and every reclaim skips the job on a 412) and the **stale-listing
double run** (a claimer that read ``queue/{id}`` before another worker
claimed, finished and released the job creates ``run/{id}`` again and runs a
finished job a second time, overwriting its result).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pail.drain import Polling
from pail.errors import ConditionFailedError, StorageError
from tests.simulation.actors import sim_job_id
from tests.simulation.invariants import Rules
from tests.simulation.scheduler import Actor, Process
from tests.simulation.sim_store import EPOCH
from tests.simulation.worker import POLL_CEILING, POLL_FLOOR

if TYPE_CHECKING:
    from tests.simulation.harness import Model, World


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def producer(world: World, process: Process) -> None:
    for index in range(world.config.jobs):
        world.scheduler.sleep(world.rng.uniform(0, world.config.enqueue_window))
        job_id = sim_job_id(index)
        world.ledger.expect(job_id)
        while True:
            try:
                world.store.put(f"queue/{job_id}", _dumps({"payload": index, "attempts": 0}))
            except StorageError:
                world.scheduler.sleep(world.rng.uniform(0.05, 0.5))
                continue
            break
    world.producer_done = True


@dataclass
class _Job:
    job_id: str
    payload: Any
    attempts: int


def _claim(world: World) -> _Job | None:
    store = world.store
    keys: list[str] = []
    token: str | None = None
    while True:
        page = store.list("queue/", continuation=token)
        keys.extend(item.key for item in page.items)
        token = page.next_token
        if token is None:
            break
    for key in sorted(keys):
        job_id = key.removeprefix("queue/")
        read_at = world.scheduler.now
        pending = store.get(key)
        if pending is None:
            continue
        data = json.loads(pending.body)
        try:
            store.put(f"run/{job_id}", pending.body, if_none_match=True)
        except ConditionFailedError:
            continue
        ended_at = world.ledger.jobs[job_id].terminal_at
        if ended_at is not None and read_at < ended_at:
            # The entry was read before the job ended: the stale-listing double run.
            world.counts["stale_listing_double_runs"] += 1
            world.ledger.note(f"stale read of queue/{job_id} at t={read_at:.3f}: runs again")
        store.delete(key)
        return _Job(job_id, data["payload"], int(data["attempts"]))
    return None


def worker(world: World, process: Process) -> None:
    polling = Polling(POLL_FLOOR, POLL_CEILING)
    wait: float | None = None
    while True:
        claim_started = world.scheduler.now
        try:
            job = _claim(world)
        except StorageError:
            job = None
        if job is None:
            wait = polling.next(wait)
            world.scheduler.sleep(wait)
            continue
        wait = None
        _run(world, process, job, claim_started)


def _run(world: World, process: Process, job: _Job, claim_started: float) -> None:
    store = world.store
    execution = world.ledger.execution_started(process, job.job_id, job.attempts + 1, claim_started)
    state = {"stop": False}
    beat: Actor = world.scheduler.spawn(
        process, f"{process.name}/hb", lambda: _heartbeat(world, job, state)
    )
    duration, raises = world.handler_outcome(job.job_id, job.attempts + 1)
    world.scheduler.sleep(duration / 2)
    world.checkpoint_current()
    world.scheduler.sleep(duration / 2)
    world.ledger.execution_ended(execution)
    state["stop"] = True
    world.scheduler.wake(beat)
    while not beat.finished:  # joined, as pail's Message joins its heartbeat
        world.scheduler.sleep(0.001)
    body = _dumps({"payload": job.payload, "attempts": job.attempts})
    try:
        if not raises:
            store.put(f"done/{job.job_id}", _dumps({"by": process.name}))
        else:
            attempts = job.attempts + 1
            retries = world.config.max_retries
            if retries is not None and attempts > retries:
                store.put(f"dlq/{job.job_id}", body)
            else:
                store.put(
                    f"queue/{job.job_id}", _dumps({"payload": job.payload, "attempts": attempts})
                )
        store.delete(f"run/{job.job_id}")
        execution.recorded = True
    except StorageError:
        execution.recorded = False


def _heartbeat(world: World, job: _Job, state: dict[str, bool]) -> None:
    interval = world.config.visibility_timeout / 3
    body = _dumps({"payload": job.payload, "attempts": job.attempts})
    while True:
        delay = interval
        if world.chaos_on and world.rng.random() < world.config.heartbeat_delay_probability:
            delay += world.config.visibility_timeout * world.rng.uniform(0.3, 1.5)
        world.scheduler.sleep(delay)
        if state["stop"]:
            return
        try:
            world.store.put(f"run/{job.job_id}", body)
        except StorageError:
            continue


def reaper(world: World, process: Process) -> None:
    store = world.store
    vt = timedelta(seconds=world.config.visibility_timeout)
    while True:
        world.scheduler.sleep(world.config.reaper_period * world.rng.uniform(0.5, 1.5))
        try:
            page = store.list("run/")
            local_now = EPOCH + timedelta(seconds=world.wall_clock(process))
            for item in page.items:
                if local_now - item.last_modified <= vt:
                    continue
                lease = store.get(item.key)
                if lease is None:
                    continue
                data = json.loads(lease.body)
                job_id = item.key.removeprefix("run/")
                again = {"payload": data["payload"], "attempts": int(data["attempts"]) + 1}
                try:
                    store.put(f"queue/{job_id}", _dumps(again), if_none_match=True)
                except ConditionFailedError:
                    continue
                store.delete(item.key)
        except StorageError:
            continue


def model() -> Model:
    """The original protocol as a ``harness.Model``."""
    from tests.simulation.harness import Model

    return Model("original", Rules.ORIGINAL, producer, worker, reaper)
