"""Workers woken by S3 events, as the worker Lambda runs: each claims the entry its event names first.

Every write that creates or replaces an object under ``queue/`` is an
*Object Created* event, delivered after a delay (0.01 to 1 s), now and then
twice, rarely never (at least once, as EventBridge delivers). Events wait in
Lambda's asynchronous queue for one of ``containers`` execution environments
(the reserved concurrency): each runs one invocation at a time, keeps its
claimer between invocations (a warm container's cached page), and dies with
a crash (another starts). An invocation is the shipped ``pail.drain`` over
the worker Lambda's own ``pail.aws.named.NamedFirst`` and a real
``Claimer`` (``worker.SimWorker``): the named entries first
(``Claimer.claim_key``), the listing only once it won one, until the queue
looks empty or its time budget ends; the drain then flushes its overlapped
requests. A
schedule (every 4 to 10 visibility timeouts) invokes it with no key: the
safety net for a lost event and for an entry written with a real due time
(a retry's backoff, a delayed job).

The harness's listing workers are left out of these runs (``workers=0``):
every job is run by an event's invocation or the schedule's, so the
ledger's invariants (nothing lost, no parallel run, one outcome) and its
quiescence hold for the woken path alone. Its own invariants, checked at
every request and write:

* **A gone job costs its GET.** An invocation whose every named entry was
  gone sends no request but the GETs of those entries (their retries
  included): no listing, no pause check, no write.
* **A named claim honours the pause.** No named claim writes a lease while
  the pause marker exists, if it existed before the claim began (with the
  pauser of ``pausing.py`` in the run).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pail.aws.named import NamedFirst
from pail.keys import QUEUE, RUN
from pail.message import Message
from pail.protocol.claim import Claimer, Named
from pail.protocol.lease import Lease
from pail.store.base import StoredObject
from tests.simulation.harness import ActorBody, Extra, SimConfig, World
from tests.simulation.invariants import Kind
from tests.simulation.pausing import pauser_for
from tests.simulation.scheduler import Actor, Process
from tests.simulation.worker import SimWorker

if TYPE_CHECKING:
    from tests.simulation.harness import Outcome

CONTAINER = "container"
"""The process kind of a Lambda execution environment."""
DUPLICATE_SHARE = 0.1
LOST_SHARE = 0.02
BUDGET_TIMEOUTS = 8
"""An invocation claims for this many visibility timeouts (a 5-minute Lambda, a 30 s lease)."""
_FOREVER = 1e9


class _Claims:
    """A claimer as ``NamedFirst`` claims through it (``pail.aws.named.Claims``), noting named claims."""

    def __init__(self, world: World, events: EventWorkers, claimer: Claimer) -> None:
        self._world = world
        self._events = events
        self._claimer = claimer

    def claim_key(self, key: str) -> Lease | None:
        actor = self._world.scheduler.current
        assert actor is not None
        self._events.named_since[actor.process] = self._world.scheduler.now
        try:
            return self._claimer.claim_key(key)
        finally:
            self._events.named_since.pop(actor.process, None)

    @property
    def named_claim_found(self) -> Named | None:
        return self._claimer.named

    def claim(self) -> Lease | None:
        return self._claimer.claim()


@dataclass
class _Invocation:
    keys: tuple[str, ...]
    requests: list[tuple[str, str]] = field(default_factory=list)


@dataclass(eq=False)
class EventWorkers:
    """The event-woken worker Lambda of one run: the event bus, the containers, the schedule."""

    rng: random.Random
    containers: int
    schedule_period: float
    queued: list[tuple[str, ...]] = field(default_factory=list)
    waiting: list[Actor] = field(default_factory=list)
    running: dict[Process, _Invocation] = field(default_factory=dict)
    named_since: dict[Process, float] = field(default_factory=dict)
    """Processes in a named claim, and when it began."""
    paused_since: float | None = None
    delivering: int = 0
    bus: Process | None = None

    @property
    def bodies(self) -> dict[str, ActorBody]:
        """The process kinds this extra adds to the run (restarted after a crash, as Lambda does)."""
        return {CONTAINER: self._container}

    # -- the harness's hooks ----------------------------------------------

    def start(self, world: World) -> None:
        self.bus = world.scheduler.new_process("event-bus", "producer")  # never crashes
        world.scheduler.spawn(self.bus, "schedule", lambda: self._schedule(world))
        for _ in range(self.containers):
            world.start(CONTAINER)

    def quiet(self, world: World) -> bool:
        return not self.queued and not self.running and not self.delivering

    def check(self, world: World) -> None:
        """Nothing left to check at the end: both invariants are checked as the run goes."""

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        if actor is not None and actor.process in self.running:
            self.running[actor.process].requests.append((op, key))

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        if key == world.keys.paused():
            self.paused_since = None if after is None else world.scheduler.now
            return
        if after is not None and key.startswith(world.keys.prefix(QUEUE)):
            self._announce(world, key)  # S3 sends Object Created for every PUT
        created = before is None and after is not None and key.startswith(world.keys.prefix(RUN))
        since = None if actor is None else self.named_since.get(actor.process)
        paused = self.paused_since
        if created and since is not None and paused is not None and paused < since:
            world.ledger.violate(
                Kind.PAUSE,
                key.rpartition("/")[2],
                f"{actor.process.name if actor else '?'} named-claimed {key} while paused "
                f"(since t={paused:.3f}, the claim began t={since:.3f})",
            )

    # -- events ------------------------------------------------------------

    def _announce(self, world: World, key: str) -> None:
        assert self.bus is not None
        roll = self.rng.random()
        if roll < LOST_SHARE:
            world.counts["named_events_lost"] += 1
            return
        copies = 2 if roll > 1 - DUPLICATE_SHARE else 1
        for _ in range(copies):
            self.delivering += 1
            delay = self.rng.uniform(0.01, 1.0)
            world.scheduler.spawn(self.bus, "event", lambda: self._deliver(world, (key,)), delay)

    def _deliver(self, world: World, keys: tuple[str, ...]) -> None:
        self.delivering -= 1
        self._queue(world, keys)

    def _queue(self, world: World, keys: tuple[str, ...]) -> None:
        self.queued.append(keys)
        world.counts["named_events"] += 1
        while self.waiting:
            container = self.waiting.pop(0)
            if not container.finished:  # a crashed container's actor is gone
                world.scheduler.wake(container)
                return

    def _schedule(self, world: World) -> None:
        while True:
            world.scheduler.sleep(self.schedule_period)
            self._queue(world, ())

    # -- a Lambda execution environment -------------------------------------

    def _container(self, world: World, process: Process) -> None:
        me = world.scheduler.current
        assert me is not None
        sim = SimWorker(world, process)
        claimer = sim.claimer(world.keys)
        while True:
            while not self.queued:
                self.waiting.append(me)
                world.scheduler.sleep(_FOREVER)
                if me in self.waiting:
                    self.waiting.remove(me)
            keys = self.queued.pop(0)
            self.running[process] = invocation = _Invocation(keys)
            try:
                found = self._invoke(world, sim, claimer, keys)
            finally:
                del self.running[process]
            self._check_cost(world, process, invocation, found)

    def _invoke(
        self, world: World, sim: SimWorker, claimer: Claimer, keys: tuple[str, ...]
    ) -> tuple[dict[str, int], bool]:
        """One invocation: the shipped ``drain(NamedFirst(...), ...)`` until empty or out of time.

        As the worker Lambda's: no polling (an empty claim ends it), a claim's
        storage error ends it, and past its deadline it claims nothing more
        (a job claimed past it goes back unstarted); it flushes before it returns.
        """
        claims = NamedFirst(_Claims(world, self, claimer), keys)
        won = False

        def claim() -> Message | None:
            nonlocal won
            claim_started = world.scheduler.now
            with world.phase("claim"):
                lease = claims()
            won = won or lease is not None
            return sim.message(lease, claim_started, claimer)

        sim.limits.deadline = (
            world.scheduler.now + BUDGET_TIMEOUTS * world.config.visibility_timeout
        )
        try:
            tally = sim.drain(claim, polling=None, paused=lambda: claimer.paused)
        finally:
            sim.limits.clear()
        if tally.error is not None:
            world.ledger.note(f"{sim.process.name}: the invocation failed: {tally.error}")
        world.counts["named_invocations"] += 1
        for name, count in claims.found.items():
            world.counts[f"named_{name}"] += count
        return dict(claims.found), won

    def _check_cost(
        self,
        world: World,
        process: Process,
        invocation: _Invocation,
        outcome: tuple[dict[str, int], bool],
    ) -> None:
        found, won = outcome
        if won or not invocation.keys or set(found) != {Named.GONE.value}:
            return
        if sum(found.values()) != len(set(invocation.keys)):
            return
        extra = [
            (op, key)
            for op, key in invocation.requests
            if op != "GET" or key not in invocation.keys
        ]
        if extra:
            job_id = invocation.keys[0].rpartition("/")[2]
            world.ledger.violate(
                Kind.NAMED_WAKE,
                job_id,
                f"{process.name}: its named entries {list(invocation.keys)} were gone, yet it "
                f"sent {extra[:5]}",
            )


def event_workers_for(seed: int) -> EventWorkers:
    """The event-woken workers of seed ``seed``'s run, drawn apart from the run's own randomness."""
    rng = random.Random(f"named-{seed}")
    return EventWorkers(rng, containers=rng.randint(1, 5), schedule_period=0.0)


def run_named_seed(seed: int, *, pausing: bool = False, sharded: bool = False) -> Outcome:
    """Simulate seed ``seed`` with event-woken workers only (and a pauser with ``pausing``)."""
    from tests.simulation.harness import sharded_config

    config = replace(SimConfig.for_seed(seed), workers=0)
    if sharded:
        config = sharded_config(config)
    workers = event_workers_for(seed)
    workers.schedule_period = config.visibility_timeout * workers.rng.uniform(4, 10)
    extras: list[Extra] = [workers]
    if pausing:
        extras.append(pauser_for(seed))
    return World(config, extras=extras).run()
