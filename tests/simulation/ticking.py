"""Schedules in the whole model: some of the main sweep's worlds have a schedule and schedulers.

The main sweep (``harness.run_seed``) draws from each seed whether its world
ticks (``ticking_for``: about one seed in ``1 / SHARE``). Such a world gets,
beside its producer, workers, reapers and operators:

* an operator (who never crashes: a person) who makes one schedule at a
  random time while chaos lasts, ``every`` one to two visibility timeouts,
  ``catch_up`` 1 or 2, with its own skewed clock;
* two scheduler processes that run the tick pass
  (``pail.protocol.schedules.Ticker``, the reaper's schedules step) about
  once a tick while chaos lasts. They crash and stall where the world's
  other processes do (``World.checkpoint``, a crashed one comes back with a
  cold cache), and the bucket's faults are theirs too.

The tick jobs are ordinary jobs of the run: their ids come from the run's
own sequence (so the ledger follows each, and the run replays), the workers
claim them, the operators cancel and redrive them, and every invariant of
``invariants.py`` holds for them. The schedules' own invariant, as
``docs/schedules.md`` states it (``Kind.TICK``), is checked at every step:

* **a tick enqueues at most one job**: every ``queue/`` entry created while
  a scheduler was inside ``enqueue_tick`` for a tick is that tick's job; two
  ids for one tick fail the run;
* **every due tick is enqueued once some scheduler has run after it**: a
  pass that listed at server time ``t`` and ended without a storage error
  leaves a job for each due tick up to ``t`` (``cron.missed_ticks``).

The run is not quiet while a scheduler is inside a pass (one stalled mid-pass
may still enqueue when it wakes). ``installed`` puts the world's wrappers in
place for one run (``harness.run_seed``); ``cron.py`` is the family of its
own with more schedules, longer runs and foreign definitions.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pail.errors import PailError
from pail.keys import QUEUE, Keys
from pail.protocol import dedup
from pail.protocol.schedules import Schedule, Ticker, runner
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.actors import sim_job_id
from tests.simulation.cron import definitions, missed_ticks
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process

if TYPE_CHECKING:
    from tests.simulation.harness import World

SHARE = 0.05
"""The share of the main sweep's seeds whose world ticks."""
FIRST_TICK_JOB = 10**9
"""Tick jobs' ids start here in the run's sequence: apart from the producer's ``0, 1, ...``."""
NAME = "sweep"
SCHEDULERS = 2
TRIES = 100


class Ticking:
    """The schedule, its schedulers and the tick invariant of one world (an ``harness.Extra``)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.world: World | None = None
        self.jobs_by_tick: dict[tuple[str, datetime], set[str]] = defaultdict(set)
        self._inside: dict[int, tuple[str, datetime]] = {}
        """Actor id -> the tick whose enqueue it is running."""
        self._in_pass: set[Process] = set()
        self._ids = iter(range(FIRST_TICK_JOB, 2 * FIRST_TICK_JOB))
        self.made = False
        self.bodies: dict[str, Callable[[World, Process], None]] = {"ticker": self._ticker}
        """The process kind this extra adds (``World.start`` restarts a crashed one by it)."""

    # -- the harness's hooks ----------------------------------------------

    def start(self, world: World) -> None:
        self.world = world
        operator = world.scheduler.new_process("schedule-operator", "producer")  # never crashes
        world.scheduler.spawn(operator, "schedule", lambda: self._operate(world, operator))
        for _ in range(SCHEDULERS):
            world.start("ticker", delay=self.rng.uniform(0, world.config.visibility_timeout))

    def quiet(self, world: World) -> bool:
        return not any(process.alive for process in self._in_pass)

    def check(self, world: World) -> None:
        """Nothing left to check at the end: both rules are checked as the run goes."""
        world.counts["tick_jobs"] += sum(1 for jobs in self.jobs_by_tick.values() if jobs)

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        pass

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        if before is not None or after is None or actor is None:
            return
        tick = self._inside.get(id(actor))
        job_id = world.keys.entry_id(key, QUEUE)
        if tick is None or job_id is None:
            return  # not a tick's new job (a retry, a release, a redrive)
        jobs = self.jobs_by_tick[tick]
        jobs.add(job_id)
        if len(jobs) > 1:
            world.ledger.violate(
                Kind.TICK, job_id, f"tick {tick[0]}@{tick[1].isoformat()} has jobs {sorted(jobs)}"
            )

    # -- the wrappers (``installed``) -------------------------------------

    def new_job_id(self) -> str:
        job_id = sim_job_id(next(self._ids))
        assert self.world is not None
        self.world.ledger.expect(job_id)
        return job_id

    def wrap(self, step: Any) -> Callable[..., Any]:
        """``step`` (``runner.enqueue_tick``, or a known-bad one) attributing what it writes."""

        def enqueue_tick(
            store: Any, keys: Keys, schedule: Schedule, tick: datetime, **kw: Any
        ) -> Any:
            assert self.world is not None
            actor = self.world.scheduler.current
            assert actor is not None
            self._inside[id(actor)] = (schedule.name, tick)
            try:
                return step(store, keys, schedule, tick, **kw)
            finally:
                self._inside.pop(id(actor), None)

        return enqueue_tick

    # -- the actors --------------------------------------------------------

    def _operate(self, world: World, process: Process) -> None:
        config = world.config
        vt = config.visibility_timeout
        pail = Pail(world.store, clock=world.clock(process), shards=config.grown_shards)
        world.scheduler.sleep(self.rng.uniform(0, config.chaos_duration / 3))
        every = max(1, round(vt * self.rng.choice((1, 1.5, 2))))
        catch_up = self.rng.choice((1, 2))
        for _ in range(TRIES):
            try:
                pail.schedule(NAME, {"tick": True}, every=every, catch_up=catch_up)
                break
            except PailError as exc:
                world.ledger.note(f"schedule operator: {exc}; trying again")
                world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
        self.made = True
        world.counts["ticking_worlds"] += 1

    def _ticker(self, world: World, process: Process) -> None:
        ticker = Ticker(world.store, world.keys)  # a new process: a cold cache
        while world.chaos_on:
            world.scheduler.sleep(world.config.visibility_timeout * self.rng.uniform(0.5, 1.5))
            listed = definitions(world.store, world.keys)
            self._in_pass.add(process)
            try:
                report = ticker.tick()
            except PailError as exc:
                world.ledger.note(f"tick pass failed: {exc}")
                continue
            finally:
                self._in_pass.discard(process)
            world.counts["tick_passes"] += 1
            if report.failed or report.at is None:
                continue
            # Only the schedules not made, paused or replaced meanwhile: what the pass saw.
            after = {(s.name, s.paused, s.created) for s in definitions(world.store, world.keys)}
            steady = [s for s in listed if not s.paused and (s.name, s.paused, s.created) in after]
            for detail in missed_ticks(steady, report.at, self.jobs_by_tick):
                world.ledger.violate(Kind.TICK, "-", detail)


def ticking_for(seed: int) -> Ticking | None:
    """The schedule of seed ``seed``'s world, or None (most seeds), drawn apart from the run's randomness."""
    rng = random.Random(f"ticking-{seed}")
    return Ticking(rng) if rng.random() < SHARE else None


@contextmanager
def installed(ticking: Ticking | None) -> Iterator[None]:
    """For one run: tick jobs take ids from the run's sequence, and their enqueues are attributed."""
    if ticking is None:
        yield
        return
    step = runner.enqueue_tick
    real_new_job_id = getattr(dedup, "new_job_id")  # noqa: B009 - not re-exported
    runner.enqueue_tick = ticking.wrap(step)
    setattr(dedup, "new_job_id", ticking.new_job_id)  # noqa: B010
    try:
        yield
    finally:
        runner.enqueue_tick = step
        setattr(dedup, "new_job_id", real_new_job_id)  # noqa: B010
