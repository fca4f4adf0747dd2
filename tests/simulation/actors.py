"""The actors that drive pail's real protocol code in the simulation.

The worker is ``Pail.work`` (``pail.drain``'s loop) unrolled, with the same calls
in the same order (``Claimer.claim``, then ``settle.complete`` or ``settle.fail``)
and the same error handling; the handler runs in the worker's actor (the
drain's handler thread and its supervision have no protocol step of their
own), and the heartbeat differs: instead of
``Message``'s background thread it is an actor of the worker's process that
calls ``Lease.renew`` every ``visibility_timeout / 3`` simulated seconds, and
is stopped and joined before the job is settled, as ``Message`` does.
The requests a worker overlaps (the claim's DELETE and HEAD, the lease's
removal after a result, the next candidate's read ahead) run as actors of its
process (``tests/simulation/overlap.py``), as ``Pail`` runs them on its pool.

``shipped_worker`` (the ``shipped`` model, ``test_shipped_worker.py``) is
the worker loop as shipped instead of that copy: ``pail.drain.drain`` and
``supervise``, ``Message`` (``complete``, ``fail``, ``release``) and
``Heartbeat``, on this process's simulated clock, store and threads
(``sim_threads.py``), with stop requests that make the drain release jobs.
The main sweep still runs the copy, so that the seeds recorded in
``regressions.py`` keep reaching their bugs; moving it to the shipped loop
needs new seeds for the variants pinned by a seed alone.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pail import drain
from pail.codec import ErrorInfo
from pail.drain import Polling
from pail.errors import JobNotFoundError, LeaseLostError, PailError, StorageError
from pail.keys import Keys
from pail.message import Message
from pail.protocol import settle
from pail.protocol.claim import Claimer
from pail.protocol.lease import Lease
from pail.protocol.reaper import Reaper
from pail.queue import Pail
from tests.simulation.overlap import SimOverlap
from tests.simulation.scheduler import Actor, Process, ProcessClock
from tests.simulation.sim_threads import SimThreads

if TYPE_CHECKING:
    from tests.simulation.harness import World
    from tests.simulation.invariants import Execution

POLL_FLOOR = 0.1
POLL_CEILING = 2.0


def sim_job_id(index: int) -> str:
    """A fixed-width id that sorts in creation order, like a ULID (Crockford digits only)."""
    return f"{index:026d}"


ROLLOUT_CHANCE = 0.2
"""Per claim, the chance that a worker still on the old shard count takes the grown one."""
RETURN_CHANCE = 0.02
"""Per job claimed under chaos, the chance that the claim ended past the worker's deadline:
the drain returns the job unstarted (``Message.release(started=False)``, the attempt kept)."""
RELEASE_CHANCE = 0.05
"""Per job claimed under chaos, the chance that a stop request (a SIGTERM) comes within a
lease of the claim: if the handler still runs then, the drain releases the job (the attempt
spent, ``LeaseReleased`` recorded)."""


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


def worker(world: World, process: Process) -> None:
    """``Pail.work``: claim, run, settle, forever; idle polling backs off."""
    config = world.config
    clock = world.scheduler.clock(process)

    overlap = SimOverlap(world, process)

    def claimer_for(keys: Keys) -> Claimer:
        return Claimer(
            world.store,
            keys,
            visibility_timeout=config.visibility_timeout,
            clock=clock,
            owner=process.name,
            stats=world.stats,
            rng=random.Random(world.rng.getrandbits(32)),
            page_size=config.page_size,
            overlap=overlap,
        )

    keys = world.worker_keys()
    claimer = claimer_for(keys)
    polling = Polling(POLL_FLOOR, POLL_CEILING)
    wait: float | None = None
    while True:
        if keys is not world.keys and world.grown and world.rng.random() < ROLLOUT_CHANCE:
            # The rollout of the grown shard count reaches this worker.
            keys = world.keys
            claimer = claimer_for(keys)
            world.counts["shard_rollouts"] += 1
        claim_started = world.scheduler.now
        try:
            with world.phase("claim"):
                lease = claimer.claim(polling=True)
        except StorageError as exc:
            world.ledger.note(f"claim failed: {exc}")
            lease = None
        if lease is None:
            wait = polling.next(wait)
            world.scheduler.sleep(wait)
            continue
        wait = None
        _run_job(world, process, lease, claim_started, overlap, claimer.read_ahead)


@dataclass(eq=False)
class _Beat:
    stop: bool = False
    finished: bool = False
    idle: bool = False
    actor: Actor | None = None
    joiner: Actor | None = None

    def stopping(self) -> bool:
        return self.stop


def _heartbeat(world: World, lease: Lease, beat: _Beat) -> None:
    """``pail.heartbeat.Heartbeat._run``: renew every interval until stopped or lost."""
    interval = world.config.visibility_timeout / 3
    try:
        while not beat.stop:
            delay = interval
            if world.chaos_on and world.rng.random() < world.config.heartbeat_delay_probability:
                delay += world.config.visibility_timeout * world.rng.uniform(0.3, 1.5)
                world.counts["heartbeat_delays"] += 1
                world.ledger.note(f"heartbeat of job {lease.job_id} delayed to {delay:.3f} s")
            beat.idle = True
            world.scheduler.sleep(delay)
            beat.idle = False
            if beat.stopping():  # set by the worker while this actor slept
                return
            try:
                with world.phase("renew"):
                    lease.renew()
            except LeaseLostError:
                world.ledger.note(f"heartbeat: lease on job {lease.job_id} lost")
                return
            except PailError as exc:
                world.ledger.note(f"heartbeat failed, will retry: {exc}")
    finally:
        beat.finished = True
        if beat.joiner is not None:
            world.scheduler.wake(beat.joiner)


def _stop_heartbeat(world: World, beat: _Beat) -> None:
    """``Heartbeat.stop``: wake it if it is waiting, and join it."""
    beat.stop = True
    if beat.actor is not None and beat.idle:
        world.scheduler.wake(beat.actor)
    beat.joiner = world.scheduler.current
    while not beat.finished:
        world.scheduler.sleep(world.config.visibility_timeout * 100)


def _run_job(
    world: World,
    process: Process,
    lease: Lease,
    claim_started: float,
    overlap: SimOverlap,
    read_ahead: Callable[[], None],
) -> None:
    """``drain.supervise``: the handler, then ``complete`` or ``fail``, errors handled the same way."""
    record = lease.record
    execution = world.ledger.execution_started(process, lease.job_id, record.attempt, claim_started)
    beat = _Beat()
    beat.actor = world.scheduler.spawn(
        process, f"{process.name}/hb", lambda: _heartbeat(world, lease, beat)
    )
    duration, raises = world.handler_outcome(lease.job_id, record.attempt, record.redriven)
    # The handler runs; its process can crash or stall half-way through.
    world.scheduler.sleep(duration / 2)
    world.checkpoint_current()
    world.scheduler.sleep(duration / 2)
    world.ledger.execution_ended(execution)
    _stop_heartbeat(world, beat)
    try:
        with world.phase("settle"):
            _settle(world, process, lease, execution, raises, overlap, read_ahead)
    except LeaseLostError as exc:
        execution.recorded = False
        world.ledger.note(f"job {lease.job_id}: settle found the lease lost: {exc}")
    except PailError as exc:
        # The drain reports it (unrecorded) and goes on; the reaper retries the job.
        execution.recorded = False
        world.ledger.note(f"job {lease.job_id}: settle failed: {exc}")


def _settle(
    world: World,
    process: Process,
    lease: Lease,
    execution: Execution,
    raises: bool,
    overlap: SimOverlap,
    read_ahead: Callable[[], None],
) -> None:
    """``Message.complete`` or ``Message.fail``, as ``drain``'s ``_finish`` picks them."""
    record, policy = lease.record, world.policy
    if raises:
        error = ErrorInfo("SimulatedError", f"attempt {record.attempt} failed")
        ending = settle.fail(world.store, lease.keys, lease, error, policy, world.stats)
        execution.recorded = True
        world.ledger.note(f"job {lease.job_id} failed: {ending}")
    elif lease.lost:
        lost = ErrorInfo("LeaseLostError", "the lease was lost while the handler ran")
        settle.fail(world.store, lease.keys, lease, lost, policy, world.stats)
        execution.recorded = False
    else:
        result = {"job": lease.job_id, "attempt": record.attempt, "by": process.name}
        won = settle.complete(
            world.store,
            lease.keys,
            lease,
            result,
            policy,
            world.stats,
            overlap=overlap,
            read_ahead=read_ahead,
        )
        execution.recorded = won
        world.ledger.note(f"job {lease.job_id} completed: {'recorded' if won else 'dropped'}")


# --- the shipped worker loop, under simulation (the "shipped" model) -----------------


def shipped_worker(world: World, process: Process) -> None:
    """``Pail.work`` as shipped: the shipped ``pail.drain.drain`` loop, on the simulated clock, store and threads.

    What is not shipped code is the glue ``Pail.work`` and ``Pail.claim`` are
    made of (a ``Claimer`` on this process's clock and overlap, its lease
    wrapped in a ``Message``), the rollout of a grown shard count, and the
    stop requests: now and then a job's worker is told to stop (a SIGTERM, a
    Lambda's deadline) mid-handler, and the drain releases the lease
    (``settle.release``, the attempt spent); or a claim ends past the point
    where no job may start, and the drain returns the job unstarted (the
    attempt kept). The drain then starts again, as the next invocation would.
    """
    config = world.config
    clock = world.scheduler.clock(process)
    overlap = SimOverlap(world, process)
    threads = SimThreads(world.scheduler, process)
    limits = _Limits()
    # Stop requests come from a stream of their own: a seed's other draws stay as they were.
    stops = random.Random(f"stops-{config.seed}-{process.name}")

    def claimer_for(keys: Keys) -> Claimer:
        return Claimer(
            world.store,
            keys,
            visibility_timeout=config.visibility_timeout,
            clock=clock,
            owner=process.name,
            stats=world.stats,
            rng=random.Random(world.rng.getrandbits(32)),
            page_size=config.page_size,
            overlap=overlap,
        )

    keys = world.worker_keys()
    claimer = claimer_for(keys)

    def claim() -> Message | None:
        nonlocal keys, claimer
        if keys is not world.keys and world.grown and world.rng.random() < ROLLOUT_CHANCE:
            # The rollout of the grown shard count reaches this worker.
            keys = world.keys
            claimer = claimer_for(keys)
            world.counts["shard_rollouts"] += 1
        claim_started = world.scheduler.now
        with world.phase("claim"):
            lease = claimer.claim(polling=True)
        if lease is None:
            return None
        limits.next_job(world, stops)
        world.restart_phase("settle")  # this job's settle (or its return) counts from here
        return _message(world, process, lease, claim_started, overlap, claimer.read_ahead, threads)

    handler = _handler(world, process)
    observer = _Observer(world, limits)
    while True:
        with world.phase("settle"):
            drain.drain(
                claim,
                handler,
                limits,
                polling=Polling(POLL_FLOOR, POLL_CEILING),
                observer=observer,
                clock=clock,
                paused=lambda: claimer.paused,
                threads=threads,
            )
        world.counts["drain_returns"] += 1
        limits.clear()


class _Limits:
    """``pail.drain.Limits`` of a simulated worker: no budget, but stop requests now and then."""

    def __init__(self) -> None:
        self.stop: drain.StopReason | None = None
        self.release: str | None = None
        self.release_at: float | None = None
        """When the stop request that releases the running job arrives (simulated time)."""
        self._now: Callable[[], float] = lambda: 0.0

    def next_job(self, world: World, stops: random.Random) -> None:
        """Maybe stop, for the job just claimed: before it starts, or halfway through it."""
        self._now = lambda: world.scheduler.now
        if not world.chaos_on:
            return
        roll = stops.random()
        if roll < RETURN_CHANCE:
            self.stop = drain.StopReason.TIME_BUDGET  # the claim ended past the deadline
            world.counts["returned_unstarted"] += 1
        elif roll < RETURN_CHANCE + RELEASE_CHANCE:
            vt = world.config.visibility_timeout
            self.release_at = world.scheduler.now + stops.uniform(0.0, vt)
            self.release = "simulated SIGTERM: the worker must stop"

    def clear(self) -> None:
        self.stop, self.release, self.release_at = None, None, None

    def stop_reason(self) -> drain.StopReason | None:
        return self.stop

    def wrap_up(self) -> bool:
        return self.stop is not None or self.release_reason() is not None

    def release_reason(self) -> str | None:
        if self.release_at is None or self._now() < self.release_at:
            return None
        return self.release


class _Observer:
    """``pail.drain.Observer``: each job's settle is a transition of its own (aimed faults)."""

    def __init__(self, world: World, limits: _Limits) -> None:
        self._world = world
        self._limits = limits

    def claimed(self, message: Message) -> None:
        self._world.restart_phase("settle")

    def settled(self, report: drain.JobReport) -> None:
        world = self._world
        world.counts[f"drain_{report.outcome}"] += 1
        world.ledger.note(f"job {report.job_id} attempt {report.attempt}: {report.outcome}")
        if report.outcome == drain.Outcome.RELEASED:
            world.counts["releases"] += 1
        self._limits.release = self._limits.release_at = None  # that job's stop request


def _handler(world: World, process: Process) -> Callable[[Any], Any]:
    """The user's handler: runs (and may crash or stall) for the job's drawn time, maybe raises.

    It learns its job as a user's handler does (``pail.drain.current_job()``)
    and is cooperative: when the drain says stop (``stopping``), it returns at
    once, its result discarded.
    """

    def handler(payload: Any) -> Any:
        job = drain.current_job()
        assert job is not None
        message = job.message
        record = message.lease.record
        claim_started = world.claims_started.pop(message.id, world.scheduler.now)
        execution = world.ledger.execution_started(
            process, message.id, record.attempt, claim_started
        )
        duration, raises = world.handler_outcome(message.id, record.attempt, record.redriven)
        # A crash unwinds from a wait (``Crash``): the ledger has ended the execution already.
        if not job.stopping.wait(duration / 2):
            world.checkpoint_current()  # its process can crash or stall half-way through
            job.stopping.wait(duration / 2)
        world.ledger.execution_ended(execution)
        if job.stopping.is_set():
            world.ledger.note(f"job {message.id}: the handler stops, the drain releases the job")
            return None
        if raises:
            raise SimulatedError(f"attempt {record.attempt} failed")
        return {"job": message.id, "attempt": record.attempt, "by": process.name}

    return handler


class SimulatedError(Exception):
    """What a simulated handler raises when its attempt fails."""


def _message(
    world: World,
    process: Process,
    lease: Lease,
    claim_started: float,
    overlap: SimOverlap,
    read_ahead: Callable[[], None],
    threads: SimThreads,
) -> Message:
    """``Pail.claim``'s wrapping of a lease, with this process's clock, overlap and threads."""
    world.claims_started[lease.job_id] = claim_started
    return Message(
        world.store,
        lease.keys,
        lease,
        world.policy,
        _HeartbeatClock(world, world.scheduler.clock(process)),
        world.stats,
        overlap=overlap,
        read_ahead=read_ahead,
        threads=threads,
    )


class _HeartbeatClock:
    """The clock a ``Message`` gives its heartbeat: late now and then, each renewal a transition.

    ``Heartbeat`` sleeps on this clock between renewals; while chaos lasts a
    sleep may run late (a loaded host, a GC pause of that thread), and the
    renewal after each sleep counts its requests as one ``renew`` (aimed faults).
    """

    def __init__(self, world: World, clock: ProcessClock) -> None:
        self._world = world
        self._clock = clock

    def monotonic(self) -> float:
        return self._clock.monotonic()

    def now(self) -> datetime:
        return self._clock.now()

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        world = self._world
        config = world.config
        if world.chaos_on and world.rng.random() < config.heartbeat_delay_probability:
            seconds += config.visibility_timeout * world.rng.uniform(0.3, 1.5)
            world.counts["heartbeat_delays"] += 1
            world.ledger.note(f"heartbeat delayed to {seconds:.3f} s")
        self._clock.sleep(seconds, wake=wake)
        world.restart_phase("renew")


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
