"""The worker of every simulated run: the shipped job loop, wired into a simulated process.

A worker runs ``pail.drain.drain`` as shipped: ``supervise`` (the handler on
a thread of its own), ``Message`` (``complete``, ``fail``, ``release``, so
``settle.release`` with the reaper's rules for a released lease) and the
``Heartbeat``. Nothing of that loop is copied here: it runs on this
process's simulated clock, store, overlap pool (``overlap.py``) and threads
(``sim_threads.py``, through ``pail.threads``), so its handler thread, its
heartbeat and its overlapped requests are actors of the worker's process
that crash and stall with it.

What is not shipped code is the glue ``Pail`` is made of (``Pail._claim``:
the hook before a claim, a ``Claimer`` on this process's clock and overlap,
its lease wrapped in a ``Message``), the rollout of a grown shard count, the
user's handler (``_handler``) and the stop requests (``StopRequests``): now
and then a job's worker is told to stop (a SIGTERM, a Lambda's deadline)
mid-handler, and the drain releases the lease (the attempt spent); or a
claim ends past the point where no job may start, and the drain returns the
job unstarted (``release(started=False)``: the lease marked ``uncounted``,
the attempt kept). The drain then starts again, as the next invocation
would.

``worker`` is ``Pail.work`` (the main sweep, the sharded, pausing, hostile
and features families); ``run_worker(before_claim=...)`` is that loop with a
step before each claim, as ``Pail``'s reclaim pass (``test_workers_only.py``);
``SimWorker.drain`` is one drain, to a deadline if its ``limits`` have one
(the worker Lambda's invocations in ``named.py``: ``NamedFirst``, no polling).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pail import drain
from pail.drain import Polling
from pail.keys import Keys
from pail.message import Message
from pail.protocol.claim import Claimer
from pail.protocol.lease import Lease
from tests.simulation.overlap import SimOverlap
from tests.simulation.scheduler import Process, ProcessClock
from tests.simulation.sim_threads import SimThreads

if TYPE_CHECKING:
    from tests.simulation.harness import World

POLL_FLOOR = 0.1
POLL_CEILING = 2.0
TICK = 0.5
"""Simulated seconds between two looks of a drain at its limits (``drain(tick=)``; shipped: 0.1).

A simulated drain's limits change only at a claim and at a stop request's
time, so a finer tick changes nothing but how late (at most one tick) a
release follows its stop request; at 0.1 s the drain's idle and supervising
naps were 2 of every 3 scheduler steps and cost the sweep 40% more CPU per seed.
"""
ROLLOUT_CHANCE = 0.2
"""Per claim, the chance that a worker still on the old shard count takes the grown one."""
RETURN_CHANCE = 0.02
"""Per job claimed under chaos, the chance that the claim ended past the worker's deadline:
the drain returns the job unstarted (``Message.release(started=False)``, the attempt kept)."""
RELEASE_CHANCE = 0.05
"""Per job claimed under chaos, the chance that a stop request (a SIGTERM) comes within a
lease of the claim: if the handler still runs then, the drain releases the job (the attempt
spent, ``LeaseReleased`` recorded)."""


def worker(world: World, process: Process) -> None:
    """``Pail.work``: the shipped drain, polling, restarted whenever a stop request ended it."""
    run_worker(world, process)


def run_worker(
    world: World, process: Process, *, before_claim: Callable[[], object] | None = None
) -> None:
    """``Pail.work`` with ``before_claim`` run before each claim, as ``Pail._claim`` runs its reclaim."""
    sim = SimWorker(world, process)
    keys = world.worker_keys()
    claimer = sim.claimer(keys)

    def claim() -> Message | None:
        nonlocal keys, claimer
        if keys is not world.keys and world.grown and world.rng.random() < ROLLOUT_CHANCE:
            # The rollout of the grown shard count reaches this worker.
            keys = world.keys
            claimer = sim.claimer(keys)
            world.counts["shard_rollouts"] += 1
        if before_claim is not None:
            before_claim()
        claim_started = world.scheduler.now
        with world.phase("claim"):
            lease = claimer.claim(polling=True)
        return sim.message(lease, claim_started, claimer)

    while True:
        sim.drain(
            claim,
            polling=Polling(POLL_FLOOR, POLL_CEILING),
            paused=lambda: claimer.paused,
        )
        world.counts["drain_returns"] += 1
        sim.limits.clear()


class SimWorker:
    """One worker process's wiring of the shipped loop: clock, overlap, threads, handler, limits."""

    def __init__(self, world: World, process: Process) -> None:
        self.world = world
        self.process = process
        self.clock = world.scheduler.clock(process)
        self.overlap = SimOverlap(world, process)
        self.threads = SimThreads(world.scheduler, process)
        self.limits = StopRequests(world)
        # Stop requests come from a stream of their own: a seed's other draws stay as they were.
        self._stops = random.Random(f"stops-{world.config.seed}-{process.name}")
        self.claims_started: dict[str, float] = {}
        """When the claim of each job this worker holds began (for the ledger)."""
        self._handler = _handler(self)
        self._observer = _Observer(world, self.limits)

    def claimer(self, keys: Keys) -> Claimer:
        """``Pail._claimer``: a ``Claimer`` on this process's clock, overlap and owner name."""
        world, config = self.world, self.world.config
        return Claimer(
            world.store,
            keys,
            visibility_timeout=config.visibility_timeout,
            clock=self.clock,
            owner=self.process.name,
            stats=world.stats,
            rng=random.Random(world.rng.getrandbits(32)),
            page_size=config.page_size,
            overlap=self.overlap,
        )

    def message(
        self, lease: Lease | None, claim_started: float, claimer: Claimer
    ) -> Message | None:
        """``Pail._message``: the lease won as a ``Message``; its settle counts from here."""
        if lease is None:
            return None
        world = self.world
        self.limits.next_job(self._stops)
        world.restart_phase("settle")  # this job's settle (or its return) counts from here
        self.claims_started[lease.job_id] = claim_started
        if world.renews_in_handler(lease.job_id):
            # Its handler renews the lease too (a fan-out names its continuation), beside the
            # heartbeat: the lease's lock must exclude them from each other, as it does
            # between real threads (only these leases, so other jobs' runs are unchanged).
            lease._lock = self.threads.rlock()  # type: ignore[assignment]
        return Message(
            world.store,
            lease.keys,
            lease,
            world.policy,
            _HeartbeatClock(world, self.clock),
            world.stats,
            overlap=self.overlap,
            read_ahead=claimer.read_ahead,
            threads=self.threads,
        )

    def drain(
        self,
        claim: Callable[[], Message | None],
        *,
        polling: Polling | None,
        paused: Callable[[], bool],
    ) -> drain.Tally:
        """One ``pail.drain.drain`` of this process, its requests in the phase ``settle``."""
        with self.world.phase("settle"):
            return drain.drain(
                claim,
                self._handler,
                self.limits,
                polling=polling,
                observer=self._observer,
                clock=self.clock,
                tick=TICK,
                paused=paused,
                flush=self.overlap.flush,
                threads=self.threads,
            )


class StopRequests:
    """``pail.drain.Limits`` of a simulated worker: no budget, but stop requests now and then.

    ``deadline`` (simulated time) is an invocation's: past it no job is
    claimed, and a job whose claim ended past it is returned unstarted.
    """

    def __init__(self, world: World, deadline: float | None = None) -> None:
        self._world = world
        self.deadline = deadline
        self.stop: drain.StopReason | None = None
        self.release: str | None = None
        self.release_at: float | None = None
        """When the stop request that releases the running job arrives (simulated time)."""
        self.holding = False
        """The handler is inside its calls of pail (a fan-out): a stop request waits."""

    def next_job(self, stops: random.Random) -> None:
        """Maybe stop, for the job just claimed: before it starts, or within a lease of it."""
        world = self._world
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
        self.stop, self.release, self.release_at, self.deadline = None, None, None, None

    def stop_reason(self) -> drain.StopReason | None:
        if self.deadline is not None and self._world.scheduler.now >= self.deadline:
            return drain.StopReason.TIME_BUDGET
        return self.stop

    def wrap_up(self) -> bool:
        # Not at the deadline: a job claimed before it runs to its end, as an invocation's
        # does until its safety margin (which the simulated ones never reach).
        return self.stop is not None or self.release_reason() is not None

    def release_reason(self) -> str | None:
        if self.holding or self.release_at is None or self._world.scheduler.now < self.release_at:
            return None
        return self.release


class _Observer:
    """``pail.drain.Observer``: each job's settle is a transition of its own (aimed faults)."""

    def __init__(self, world: World, limits: StopRequests) -> None:
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


def _handler(sim: SimWorker) -> Callable[[Any], Any]:
    """The user's handler: runs (and may crash or stall) for the job's drawn time, maybe raises.

    It learns its job as a user's handler does (``pail.drain.current_job()``)
    and is cooperative: when the drain says stop (``stopping``), it returns at
    once, its result discarded.
    """
    world, process = sim.world, sim.process

    def handler(payload: Any) -> Any:
        job = drain.current_job()
        assert job is not None
        message = job.message
        record = message.lease.record
        claim_started = sim.claims_started.pop(message.id, world.scheduler.now)
        execution = world.ledger.execution_started(
            process, message.id, record.attempt, claim_started
        )
        duration, raises = world.handler_outcome(message.id, record.attempt, record.redriven)
        # An extra's calls of pail from the handler (a fan-out). A stop request that comes
        # meanwhile is seen once they return, as if the handler masked SIGTERM for them: a
        # drain does not wait for its handler, and this process's next drain would run the
        # job's next attempt beside them (a real process exits on SIGTERM; this one goes on).
        sim.limits.holding = True
        try:
            world.handling(message.id)
        except Exception:
            world.ledger.execution_ended(execution)  # it raised: the drain fails the attempt
            raise
        finally:
            sim.limits.holding = False
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
