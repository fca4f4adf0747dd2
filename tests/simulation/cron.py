"""Schedulers as simulation actors: ticks under crashes, stalls, clock skew and foreign bytes.

A world is a simulated bucket (``SimStore``: latency, 5xx, 409s, lost
responses), two or three scheduler processes that each run a tick pass
(``pail.protocol.schedules.Ticker``, the reaper's schedules step) about once
a minute, a producer whose wall clock is skewed by up to a minute making the
schedules (and pausing one for a while, then resuming it), and a worker that claims and completes the jobs (so a tick's job
may be done, not pending, when another scheduler meets its key record).
Schedulers crash at the ends of any request (and come back, with a cold
cache, after a while) or freeze mid-pass; their own clocks are skewed too.

The invariant, as ``docs/schedules.md`` states it, checked at every step:

* **at most one job per tick**: every ``queue/`` entry created is
  attributed to the tick whose enqueue wrote it (the actor was inside
  ``enqueue_tick`` for that tick); two job ids for one tick fail the run;
* **every due tick is enqueued once some scheduler has run after it**: when
  a pass that listed at server time ``t`` ends without a storage error, each
  schedule it listed has a job for its latest ``catch_up`` ticks in
  (``created``, ``t``], unless ``catch_up`` later ticks have jobs already (the
  pass stalled after its listing, and a scheduler that ran since skipped the
  tick as missed, as ``catch_up`` allows).

``enqueue_tick`` is the one replaceable step: a known-bad variant (a tick
enqueued without its dedup) is put in with ``monkeypatch``, and the world
wraps whatever step is in place to attribute the entries it writes.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pail.errors import PailError
from pail.keys import QUEUE, Keys
from pail.protocol.schedules import Schedule, Ticker, runner
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.scheduler import Actor, Process, ProcessClock, Scheduler
from tests.simulation.sim_store import FaultRates, SimStore

SCHEDULES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("minutely", {"every": 60}),
    ("ninety", {"every": 90, "catch_up": 3}),
    ("even-minutes", {"cron": "*/2 * * * *"}),
    ("berlin", {"cron": "*/3 * * * *", "timezone": "Europe/Berlin", "catch_up": 2}),
)
FOREIGN = (b"", b"{not json", b'{"v": 1, "name": "x", "every": "soon"}')


@dataclass(frozen=True, slots=True)
class Chaos:
    """How often things go wrong, per request end of a scheduler (crash, freeze)."""

    crash: float = 0.01
    freeze: float = 0.005
    faults: FaultRates = field(
        default_factory=lambda: FaultRates(transient=0.03, conflict=0.02, timeout_after_apply=0.03)
    )
    skew: float = 60.0
    """Each process's wall clock is off by up to this many seconds, either way."""


@dataclass
class Violation:
    kind: str
    detail: str


def missed_ticks(
    listed: list[Schedule], at: datetime, jobs_by_tick: dict[tuple[str, datetime], set[str]]
) -> list[str]:
    """The due ticks a pass that listed ``listed`` at server time ``at``, and ended, left without a job.

    Each schedule's latest ``catch_up`` ticks in (``created``, ``at``] must
    have a job, unless ``catch_up`` later ticks have jobs already: the pass
    stalled after its listing, and a scheduler that ran since skipped the
    tick as missed, as ``catch_up`` allows.
    """
    found = []
    for schedule in listed:
        done = sorted(
            tick for (name, tick), jobs in jobs_by_tick.items() if name == schedule.name and jobs
        )
        for tick in schedule.timing.latest(at, after=schedule.created, limit=schedule.catch_up):
            if jobs_by_tick.get((schedule.name, tick)):
                continue
            if sum(1 for later in done if later > tick) >= schedule.catch_up:
                continue
            found.append(
                f"a pass listed at {at.isoformat()} and ended, but tick {schedule.name}@"
                f"{tick.isoformat()} has no job"
            )
    return found


def definitions(store: SimStore, keys: Keys) -> list[Schedule]:
    """The readable schedules now (read outside any actor: no request, no fault)."""
    found = []
    for key in store.keys():  # noqa: SIM118 - SimStore is not a mapping
        if key.startswith(keys.schedules()):
            obj = store.peek(key)
            try:
                found.append(Schedule.decode(obj.body, key.rsplit("/", 1)[-1]))  # type: ignore[union-attr]
            except PailError:
                continue
    return found


class _Observer:
    """Crashes and freezes schedulers at request ends; attributes every new job to its tick."""

    def __init__(self, world: World) -> None:
        self._world = world

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        if before is None and after is not None and actor is not None:
            job_id = self._world.keys.entry_id(key, QUEUE)
            if job_id is not None:
                self._world.entry_written(actor, job_id)

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        pass

    def checkpoint(self, actor: Actor) -> None:
        self._world.maybe_fail(actor)

    def before_request(self, actor: Actor, op: str, key: str) -> None:
        pass


class World:
    """One seeded run; ``run()`` returns the violations found (none: the invariant held)."""

    def __init__(self, seed: int, *, chaos: Chaos | None = None, minutes: int = 20) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.chaos = chaos or Chaos()
        self.minutes = minutes
        self.scheduler = Scheduler()
        self.store = SimStore(self.scheduler, self.rng, _Observer(self), faults=self.chaos.faults)
        self.keys = Keys()
        self.violations: list[Violation] = []
        self.jobs_by_tick: dict[tuple[str, datetime], set[str]] = defaultdict(set)
        self._inside: dict[int, tuple[str, datetime]] = {}
        """Actor id -> the tick whose enqueue it is running."""
        self.passes = 0
        self.crashes = 0
        self.freezes = 0
        self._restarts = 0
        self._step = runner.enqueue_tick

    # -- the invariant ------------------------------------------------------

    def entry_written(self, actor: Actor, job_id: str) -> None:
        tick = self._inside.get(id(actor))
        if tick is None:
            return  # a worker's retry or release: not a new job
        jobs = self.jobs_by_tick[tick]
        jobs.add(job_id)
        if len(jobs) > 1:
            self._violate(
                "duplicate", f"tick {tick[0]}@{tick[1].isoformat()} has jobs {sorted(jobs)}"
            )

    def _check_pass(self, listed: list[Schedule], at: datetime) -> None:
        for detail in missed_ticks(listed, at, self.jobs_by_tick):
            self._violate("missed", detail)

    def _violate(self, kind: str, detail: str) -> None:
        self.violations.append(Violation(kind, f"seed {self.seed}: {detail}"))

    # -- chaos ----------------------------------------------------------------

    def maybe_fail(self, actor: Actor) -> None:
        process = actor.process
        if process.kind != "scheduler" or not process.alive:
            return
        roll = self.rng.random()
        if roll < self.chaos.crash:
            self.crashes += 1
            self._start_scheduler(delay=self.rng.uniform(1, 150))  # a new process, cold cache
            self.scheduler.crash(process)
        elif roll < self.chaos.crash + self.chaos.freeze:
            self.freezes += 1
            self.scheduler.freeze(process, self.scheduler.now + self.rng.uniform(1, 240))

    # -- actors ---------------------------------------------------------------

    def _clock(self, process: Process) -> ProcessClock:
        skew = self.rng.uniform(-self.chaos.skew, self.chaos.skew)
        return ProcessClock(self.scheduler, process.clock_offset, skew=skew)

    def _enqueue_tick(
        self, store: Any, keys: Keys, schedule: Schedule, tick: datetime, **kw: Any
    ) -> Any:
        actor = self.scheduler.current
        assert actor is not None
        self._inside[id(actor)] = (schedule.name, tick)
        try:
            return self._step(store, keys, schedule, tick, **kw)
        finally:
            self._inside.pop(id(actor), None)

    def _start_scheduler(self, delay: float = 0.0) -> None:
        self._restarts += 1
        process = self.scheduler.new_process(f"scheduler-{self._restarts}", "scheduler")
        ticker = Ticker(self.store, self.keys)

        def loop() -> None:
            while True:
                listed = self._definitions()
                try:
                    report = ticker.tick()
                except PailError:
                    report = None  # the listing failed: the reaper logs it and goes on
                if report is not None and not report.failed and report.at is not None:
                    self.passes += 1
                    # Only the schedules not paused, resumed or made meanwhile: what the pass saw.
                    after = {(s.name, s.paused, s.created) for s in self._definitions()}
                    steady = [
                        s for s in listed if not s.paused and (s.name, s.paused, s.created) in after
                    ]
                    self._check_pass(steady, report.at)
                self.scheduler.sleep(self.rng.uniform(50, 70))

        self.scheduler.spawn(process, "ticks", loop, delay=delay)

    def _definitions(self) -> list[Schedule]:
        return definitions(self.store, self.keys)

    def _producer(self) -> None:
        process = self.scheduler.new_process("producer", "producer")
        pail = Pail(self.store, clock=self._clock(process), shards=1)
        order = list(SCHEDULES)
        self.rng.shuffle(order)

        def make() -> None:
            for name, timing in order:
                self.scheduler.sleep(self.rng.uniform(0, 200))
                self._retried(functools.partial(pail.schedule, name, {"schedule": name}, **timing))
            # An operator pauses one schedule for a while, then resumes it.
            chosen = self.rng.choice(order)[0]
            self.scheduler.sleep(self.rng.uniform(0, 300))
            self._retried(functools.partial(pail.pause_schedule, chosen))
            self.scheduler.sleep(self.rng.uniform(30, 300))
            self._retried(functools.partial(pail.pause_schedule, chosen, paused=False))

        self.scheduler.spawn(process, "schedules", make)

    def _retried(self, call: Callable[[], object]) -> None:
        for _ in range(5):
            try:
                call()
                return
            except PailError:
                self.scheduler.sleep(5)

    def _worker(self) -> None:
        """Finishes jobs as a worker's claim and complete would leave them: ``done/`` written, entry gone.

        (The real claim's overlapped requests run on threads, which the
        greenlet scheduler cannot host; the schedules only need to meet jobs
        that are pending, and jobs that ended.)
        """
        process = self.scheduler.new_process("worker", "worker")

        def work() -> None:
            while True:
                try:
                    for item in self.store.list(self.keys.prefix(QUEUE)).items:
                        job_id = self.keys.entry_id(item.key, QUEUE)
                        if job_id is not None and self.rng.random() < 0.5:
                            self.store.put(self.keys.done(job_id), b"{}")
                            self.store.delete(item.key)
                except PailError:
                    pass
                self.scheduler.sleep(self.rng.uniform(5, 30))

        self.scheduler.spawn(process, "work", work)

    def run(self) -> list[Violation]:
        """Run ``minutes`` of simulated time; the violations found."""
        for n, body in enumerate(FOREIGN):
            self.store.put(f"{self.keys.schedules()}foreign-{n}", body)
        self.store.put(f"{self.keys.schedules()}nested/key", b"{}")
        self._producer()
        self._worker()
        for _ in range(self.rng.choice((2, 3))):
            self._start_scheduler(delay=self.rng.uniform(0, 60))

        previous = runner.enqueue_tick
        runner.enqueue_tick = self._enqueue_tick
        try:
            self.scheduler.run(
                lambda: bool(self.violations),
                max_steps=400_000,
                until=self.minutes * 60.0,
            )
        finally:
            runner.enqueue_tick = previous
            self.scheduler.shutdown()
        return self.violations


def simulate(seed: int, **kwargs: Any) -> World:
    """One world, run."""
    world = World(seed, **kwargs)
    world.run()
    return world


def describe(world: World) -> str:
    """What a failed run saw, for the assertion message."""
    lines = [v.detail for v in world.violations[:5]]
    lines.append(
        f"passes {world.passes}, crashes {world.crashes}, freezes {world.freezes}, "
        f"ticks with a job {sum(1 for j in world.jobs_by_tick.values() if j)}"
    )
    return "\n".join(lines)
