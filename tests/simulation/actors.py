"""The actors of a simulated run that have no shipped loop of their own: producer, reaper, operators.

Each drives pail's real code (``Pail.enqueue``, ``Reaper.reap``,
``Pail.redrive``, ``Pail.cancel``, ``Pail.status``) on the simulated store
and clock; what is written here is only the person or the schedule around
the call (how often, which job, what to do on an error). The worker is not
here: it is the shipped job loop (``pail.drain``), wired into a simulated
process by ``worker.py``.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pail.errors import JobNotFoundError, PailError, StorageError
from pail.protocol.reaper import Reaper
from pail.queue import Pail

if TYPE_CHECKING:
    from tests.simulation.harness import World
    from tests.simulation.scheduler import Process


def sim_job_id(index: int) -> str:
    """A fixed-width id that sorts in creation order, like a ULID (Crockford digits only)."""
    return f"{index:026d}"


def producer(world: World, process: Process) -> None:
    """A user's producer: ``Pail.enqueue`` each job; on an error, enqueue it again (a new id).

    An enqueue that raises may still have landed (its tries all lost their
    responses): the ledger follows every id that reached the bucket, so that
    job must end like any other.
    """
    config = world.config
    pail = grown = Pail(
        world.store,
        visibility_timeout=config.visibility_timeout,
        max_retries=config.max_retries,
        clock=world.clock(process),
        shards=config.grown_shards,
    )
    if config.shards != config.grown_shards:
        pail = Pail(
            world.store,
            visibility_timeout=config.visibility_timeout,
            max_retries=config.max_retries,
            clock=world.clock(process),
            shards=config.shards,
        )
    for index in range(config.jobs):
        if index == config.jobs // 2 and pail is not grown:
            # The shard count grows with jobs in flight: the rest go to the new layout.
            world.counts["shard_growths"] += 1
            world.ledger.note(f"queue grows from {config.shards} to {config.grown_shards} shards")
            grown.write_stats = pail.write_stats
            pail = grown
            world.grown = True
        world.scheduler.sleep(world.rng.uniform(0, config.enqueue_window))
        while True:
            try:
                pail.enqueue({"n": index})
            except StorageError as exc:
                world.counts["enqueue_errors"] += 1
                world.ledger.note(f"enqueue failed, enqueuing again: {exc}")
                world.scheduler.sleep(world.rng.uniform(0.05, 0.5))
                continue
            break
    world.counts["enqueue_ambiguous"] += pail.write_stats.by_reason.get("enqueue", 0)
    world.producer_done = True


def reaper(world: World, process: Process) -> None:
    """A scheduled reaper: ``Reaper.reap`` every period, surviving storage errors."""
    config = world.config
    instance = Reaper(
        world.store,
        world.keys,
        world.policy,
        stats=world.stats,
        page_size=config.reaper_page_size,
        max_pages=config.reaper_max_pages,
    )
    while True:
        world.scheduler.sleep(config.reaper_period * world.rng.uniform(0.5, 1.5))
        try:
            with world.phase("reap"):
                report = instance.reap()
        except PailError as exc:
            world.ledger.note(f"reap failed: {exc}")
            continue
        world.counts["reaper_passes"] += 1
        if report.expired:
            world.ledger.note(
                f"reaped: requeued {report.requeued_ids} dead {report.dead_lettered_ids} "
                f"cleaned {report.cleaned} renewed {report.renewed}"
            )


def redriver(world: World, process: Process) -> None:
    """An operator who redrives dead letters while chaos lasts: ``Pail.redrive``.

    Each dead job is redriven at most ``redrive_budget`` times (a redrive
    that refused, the dead-letter still under way, does not count), so runs
    end; now and then a pass is ``redrive(all=True)``, which lists ``dlq/``.
    """
    config = world.config
    pail = Pail(
        world.store,
        visibility_timeout=config.visibility_timeout,
        max_retries=config.max_retries,
        shards=config.grown_shards,
    )
    # Its choices come from a stream of its own: the number of requests other actors
    # make (each draws from world.rng) must not turn a one-job redrive into redrive(all).
    picker = random.Random(f"redriver-{config.seed}-{process.name}")
    while world.chaos_on:
        world.scheduler.sleep(world.rng.uniform(0.05, config.visibility_timeout))
        dead = [
            job_id
            for job_id, job in world.ledger.jobs.items()
            if job.dead and world.redrives_left.setdefault(job_id, config.redrive_budget) > 0
        ]
        if not dead:
            continue
        everything = picker.random() < 0.2
        chosen = dead if everything else [picker.choice(dead)]
        try:
            with world.phase("redrive"):
                done = pail.redrive(all=True) if everything else pail.redrive(chosen[0])
        except PailError as exc:  # StorageError, or a job that moved on: an operator goes on
            world.ledger.note(f"redrive of {chosen} failed: {exc}")
            continue
        for job_id in done:
            world.redrives_left[job_id] = world.redrives_left.get(job_id, 1) - 1
        world.counts["redrive_calls"] += 1
        world.ledger.note(f"redrive returned {done}")


def canceller(world: World, process: Process) -> None:
    """An operator who cancels jobs (dead and redriven ones first) and reads their status.

    It races the redriver: a job it picks is most often one that is dead or
    was just redriven, so ``cancel`` meets every step of a redrive across the
    sweep. Each ``cancel`` result is told to the ledger (a job said cancelled
    must end cancelled); each ``status`` is checked against the outcome that
    stood for the whole call.
    """
    config = world.config
    pail = Pail(
        world.store,
        visibility_timeout=config.visibility_timeout,
        max_retries=config.max_retries,
        shards=config.grown_shards,
    )
    targets = {job_id for job_id in world.ledger.jobs if world.rng.random() < config.cancel_share}
    while world.chaos_on:
        world.scheduler.sleep(world.rng.uniform(0.02, config.visibility_timeout / 2))
        jobs = world.ledger.jobs
        enqueued = [job_id for job_id, job in jobs.items() if job.enqueued]
        if not enqueued:
            continue
        _read_status(world, pail, world.rng.choice(enqueued))
        racing = [j for j in enqueued if j in targets and (jobs[j].dead or jobs[j].redrives)]
        pool = racing or [j for j in enqueued if j in targets]
        if not pool:
            continue
        job_id = world.rng.choice(pool)
        try:
            with world.phase("cancel"):
                cancelled = pail.cancel(job_id)
        except JobNotFoundError:
            continue  # between two states four times in a row: harmless
        except PailError as exc:
            world.ledger.note(f"cancel of {job_id} failed: {exc}")
            continue
        world.counts["cancels"] += 1
        world.counts[f"cancel_{'cancelled' if cancelled else 'ended'}"] += 1
        world.ledger.cancel_returned(job_id, cancelled)
        world.ledger.note(f"cancel of job {job_id} returned {cancelled}")
        if cancelled:
            targets.discard(job_id)


def _read_status(world: World, pail: Pail, job_id: str) -> None:
    """``Pail.status``, checked against the job's outcome if it stood for the whole call."""
    job = world.ledger.jobs[job_id]
    began, before, redrives = world.scheduler.now, job.outcome, job.redrives
    try:
        with world.phase("status"):
            status = pail.status(job_id)
    except PailError as exc:
        world.ledger.note(f"status of {job_id} failed: {exc}")
        return
    world.counts["status_reads"] += 1
    if job.outcome == before and job.redrives == redrives:
        state = None if status is None else str(status.state)
        world.ledger.status_read(job_id, began, state, before)
