"""One simulated run per seed: the world, its chaos, the end-of-run checks and the report.

``run_seed(seed)`` builds everything from the seed alone: the shape of the
run (jobs, workers, reapers, retry policy, fault and crash rates, standard
or express listing), the scheduler's interleaving, every fault, crash and
stall, and every handler's duration and outcome. The same seed always
replays the same run (``scripts/simulate --seed S``).

A run has two phases. While chaos is on, requests fail, processes crash and
stall, heartbeats are late. Then chaos stops (stalls in progress still run
out) and the run goes on until it is quiet: every job terminal, nothing in
``queue/`` or ``run/``, no execution open, no process frozen, and still so
after a settling margin (a zombie that wakes up late may write again). A run
that does not get quiet within its time limit fails as stuck.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from itertools import count
from typing import Any, Protocol

from pail import queue as pail_queue
from pail.keys import Keys
from pail.protocol import delay
from pail.protocol.limits import gate as limit_gate
from pail.protocol.limits import slots as limit_slots
from pail.protocol.settle import Policy
from pail.protocol.writes import WriteStats
from pail.store.base import StoredObject
from tests.simulation import actors, worker
from tests.simulation.dependencies import graphs_for
from tests.simulation.hostile import extras_for
from tests.simulation.invariants import QUEUE, RUN, Kind, Ledger, Rules, Violation
from tests.simulation.limits import limits_for
from tests.simulation.overlap import OVERLAPPED
from tests.simulation.pausing import pauser_for
from tests.simulation.scheduler import Actor, Process, ProcessClock, Scheduler
from tests.simulation.sim_store import FaultRates, Latency, SimStore
from tests.simulation.ticking import installed, ticking_for

MAX_STEPS = 300_000
SETTLE_ROUNDS = 4

ActorBody = Callable[["World", Process], None]


class Extra(Protocol):
    """Actors that join a run with invariants of their own (``hostile.Foreign``, ``pausing.Pauser``)."""

    def start(self, world: World) -> None: ...

    def quiet(self, world: World) -> bool: ...

    def check(self, world: World) -> None: ...

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        """Every request the store answered (``SimStore``'s observer), after the ledger."""

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        """Every change the store applied, after the ledger."""


@dataclass(frozen=True, slots=True)
class Model:
    """A queue protocol to simulate: its actors and how it stores a terminal state."""

    name: str
    rules: Rules
    producer: ActorBody
    worker: ActorBody
    reaper: ActorBody


PAIL = Model("pail", Rules.PAIL, actors.producer, worker.worker, actors.reaper)
"""pail as shipped: its producer, its job loop (``worker.py``: ``pail.drain``), its reaper."""


OPERATORS = ("redriver", "canceller")
"""Process kinds that act for a person: a run is not quiet while one of their calls is under way."""
PHASES = ("claim", "promote", "settle", "renew", "reap", "cancel", "redrive", "status")
"""The transitions a fault can be aimed at (the producer's ``enqueue`` is never faulted)."""
AIM_MAX_REQUEST = 9
"""Aimed faults hit one of the first this-many requests (tries) of a phase: every request of
a claim, a settle, a reaper's fence-and-requeue, a cancel or a redrive is among them."""


def triples() -> set[tuple[str, int, str]]:
    """Every (phase, request, action) an aimed fault can be drawn for: the coverage to strike."""
    return {
        (phase, request, str(action))
        for phase in PHASES
        for request in range(1, AIM_MAX_REQUEST + 1)
        for action in AimAction
    }


STRUCK = "struck"
"""The prefix of the counts of aimed faults that struck: ``struck phase request action``."""


def struck_key(phase: str, request: int, action: str) -> str:
    """The count of the aimed ``action`` striking before request ``request`` of ``phase``."""
    return f"{STRUCK} {phase} {request} {action}"


def struck(counts: Counter[str]) -> set[tuple[str, int, str]]:
    """The (phase, request, action) triples that struck at least once in ``counts``."""
    found = set()
    for name, times in counts.items():
        if times and name.startswith(f"{STRUCK} "):
            _, phase, request, action = name.split(" ")
            found.add((phase, int(request), action))
    return found


class AimAction(StrEnum):
    """What an aimed fault does to the process, just before it sends the request."""

    LONG_STALL = "long-stall"
    """A pause past the lease: 1.1 to 3 visibility timeouts."""
    SHORT_STALL = "short-stall"
    """A pause shorter than the lease: 0.05 to 1 visibility timeout."""
    CRASH = "crash"


@dataclass(frozen=True, slots=True)
class Aim:
    """A fault aimed at request ``request`` of the phase ``phase``, the first ``hits`` times.

    Random crashes and stalls hit any request with a small probability; an
    aimed fault makes sure that every request of every transition is hit
    across the sweep, each seed drawing one (phase, request, action).
    """

    phase: str
    request: int
    action: AimAction
    hits: int = 1
    pause: float | None = None
    """A stall's length in visibility timeouts (drawn from the action's range when None)."""
    op: str | None = None
    """Aim at the first request of the phase whose operation and key start with ``op`` and
    ``key`` (``request`` is then ignored): how a schedule names "before the claim's DELETE"."""
    key: str = ""

    def __str__(self) -> str:
        return f"{self.action} before request {self.request} of {self.phase} (x{self.hits})"


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The shape of one run, drawn from its seed."""

    seed: int
    jobs: int
    workers: int
    reapers: int
    max_retries: int | None
    visibility_timeout: float
    fail_probability: float
    long_handler_probability: float
    faults: FaultRates
    latency: Latency
    crash_probability: float
    stall_probability: float
    heartbeat_delay_probability: float
    express: bool
    page_size: int
    reaper_page_size: int
    reaper_max_pages: int
    reaper_period: float
    enqueue_window: float
    chaos_duration: float
    clock_skew: float
    aim: Aim | None = None
    more_aims: tuple[Aim, ...] = ()
    """Further aimed faults (a schedule's second pause); the sweep draws one aim per seed."""
    redrive_budget: int = 0
    cancel_share: float = 0.0
    shards: int = 1
    """The shard count the run starts with (its producer's first half of jobs, some workers)."""
    grown_shards: int = 1
    """The count the queue grows to mid-run: the producer's second half, the other workers,
    the reapers and the operators (a rollout in progress: both counts at once)."""

    @classmethod
    def for_seed(cls, seed: int, *, chaos: bool = True) -> SimConfig:
        """A small, cheap run whose every knob is drawn from ``seed``.

        ``chaos=False`` keeps the shape but injects nothing: no fault, crash,
        stall or late heartbeat; only the scheduling (and slow requests) vary.
        """
        config = cls._draw(seed)
        if chaos:
            return config
        return replace(
            config,
            faults=FaultRates(),
            crash_probability=0.0,
            stall_probability=0.0,
            heartbeat_delay_probability=0.0,
            aim=None,
        )

    @classmethod
    def _draw(cls, seed: int) -> SimConfig:
        rng = random.Random(f"config-{seed}")
        vt = rng.choice([2.0, 3.0, 5.0])
        fault_total = rng.choice([0.0, 0.02, 0.08, 0.2])
        split = [rng.random() for _ in range(3)]
        share = [fault_total * s / sum(split) for s in split]
        return cls(
            seed=seed,
            jobs=rng.randint(1, 5),
            workers=rng.randint(1, 4),
            reapers=rng.choice([1, 1, 2]),
            max_retries=rng.choice([0, 1, 2, 3, None]),
            visibility_timeout=vt,
            fail_probability=rng.choice([0.0, 0.2, 0.5]),
            long_handler_probability=rng.choice([0.0, 0.1, 0.3]),
            faults=FaultRates(
                transient=share[0],
                conflict=share[1],
                timeout_after_apply=share[2],
                attempts=rng.choice([1, 2, 3, 5]),
            ),
            latency=Latency(
                tail_probability=rng.choice([0.0, 0.02, 0.1]),
                tail_high=rng.choice([0.5, 2.0, vt * 1.5]),
                response_timeout=rng.uniform(0.1, vt / 2),
            ),
            crash_probability=rng.choice([0.0, 0.002, 0.01, 0.03]),
            stall_probability=rng.choice([0.0, 0.002, 0.01, 0.03]),
            heartbeat_delay_probability=rng.choice([0.0, 0.05, 0.2]),
            express=rng.random() < 0.3,
            page_size=rng.choice([1, 2, 5, 100]),
            reaper_page_size=rng.choice([1, 2, 1000]),
            reaper_max_pages=rng.choice([1, 10]),
            reaper_period=vt * rng.uniform(0.3, 2.0),
            enqueue_window=vt * rng.uniform(0.0, 2.0),
            chaos_duration=vt * rng.uniform(3.0, 12.0),
            clock_skew=rng.choice([0.0, 0.5, vt]),
            aim=Aim(
                phase=rng.choice(PHASES),
                request=rng.randint(1, AIM_MAX_REQUEST),
                action=rng.choice(list(AimAction)),
                hits=rng.randint(1, 3),
            ),
            redrive_budget=rng.choice([0, 1, 1, 2]),
            cancel_share=rng.choice([0.0, 0.0, 0.3, 0.6]),
        )


@dataclass
class Outcome:
    """What one run found."""

    seed: int
    model: str
    config: SimConfig
    violations: list[Violation]
    counts: Counter[str]
    faults: Counter[str]
    sim_time: float
    steps: int
    trace: list[str] = field(default_factory=list)
    replay_flags: str = ""
    """What ``scripts/simulate --seed S`` needs besides the seed to replay this run."""

    @property
    def replay(self) -> str:
        """The command that replays this run, with its trace."""
        model = "" if self.model in ("pail", "features") else f" --model {self.model}"
        return f"scripts/simulate --seed {self.seed}{model}{self.replay_flags}"

    @property
    def failed(self) -> bool:
        return bool(self.violations)

    def kinds(self) -> set[Kind]:
        return {v.kind for v in self.violations}

    def report(self) -> str:
        """The seed, the run's shape, what broke, and the steps that led there."""
        lines = [
            f"seed {self.seed} ({self.model}): {len(self.violations)} violation(s), "
            f"t={self.sim_time:.1f} s simulated, {self.steps} steps",
            f"replay: {self.replay}",
            "config: " + ", ".join(f"{k}={v}" for k, v in asdict(self.config).items()),
            *(f"  {v}" for v in self.violations[:10]),
            "trace (events of the jobs involved, and every crash and stall):",
            *self.trace,
        ]
        return "\n".join(lines)


class World:
    """Everything one run shares: scheduler, store, ledger, chaos. Also the store's observer."""

    def __init__(
        self,
        config: SimConfig,
        model: Model = PAIL,
        *,
        full_trace: bool = False,
        extras: Sequence[Extra] = (),
    ) -> None:
        self.config = config
        self.extras = list(extras)
        """Foreign writers and readers of the run (``tests/simulation/hostile.py``)."""
        self.full_trace = full_trace
        self.replay_flags = ""
        """The flags that rebuild this run from its seed (``Outcome.replay_flags``)."""
        self.model = model
        self.rng = random.Random(config.seed)
        self.scheduler = Scheduler()
        self.ledger = Ledger(
            self.scheduler,
            visibility_timeout=config.visibility_timeout,
            max_retries=config.max_retries,
            rules=model.rules,
        )
        self.store = SimStore(
            self.scheduler,
            random.Random(self.rng.getrandbits(64)),
            self,
            bucket="sim--use1-az4--x-s3" if config.express else "sim",
            ordered_listing=not config.express,
            faults=config.faults,
            latency=config.latency,
        )
        self.keys = Keys(shards=config.grown_shards)
        self.old_keys = Keys(shards=config.shards)
        self._workers_started = 0
        self.grown = config.shards == config.grown_shards
        """True once the producer writes under the grown count."""
        self.policy = Policy(config.max_retries, config.visibility_timeout)
        self.stats = WriteStats()
        self.counts: Counter[str] = Counter()
        self.chaos_on = True
        self.producer_done = False
        self.last_stall_end = 0.0
        self.skews: dict[Process, float] = {}
        self.redrives_left: dict[str, int] = {}
        self.operating = 0
        """Operator calls (redrive, cancel) under way."""
        self._numbers = count(1)
        self._outcomes: dict[tuple[str, int, int], tuple[float, bool]] = {}
        self._phases: dict[Actor, list[str | int]] = {}
        self._aim_hits = [0] * (1 + len(config.more_aims))
        self.on_aim: Callable[[World, Actor], None] | None = None
        """Called when the aimed fault strikes (a schedule starts its racing actor there)."""
        self.outcomes: Callable[[str, int, int], tuple[float, bool]] | None = None
        """A schedule's handler: ``(job, attempt, life) -> (duration, raises)``; random if None."""
        self.scheduler.on_error = self.ledger_actor_died

    # -- the store's observer ---------------------------------------------

    def worker_keys(self) -> Keys:
        """The keys a starting worker claims with: a rollout of the grown count in progress.

        The first worker has the grown count, so some worker lists every
        shard; another started before the queue grew has the count it
        started with (not rolled out yet); one (re)started after, the grown one.
        """
        self._workers_started += 1
        if self._workers_started == 1 or self.grown:
            return self.keys
        return self.old_keys

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        self.ledger.call = self.store.applying  # a resend of one call is one write
        self.ledger.mutated(key, before, after, actor)
        for extra in self.extras:
            extra.mutated(self, key, before, after, actor)

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        self.ledger.request(actor, op, key, outcome)
        for extra in self.extras:
            extra.request(self, actor, op, key, outcome)

    def checkpoint(self, actor: Actor) -> None:
        """Maybe crash or stall ``actor``'s process, here, between two requests."""
        process = actor.process
        if not self.chaos_on or process.kind == "producer":
            return
        roll = self.rng.random()
        if roll < self.config.crash_probability:
            self._crash(process)
        elif roll < self.config.crash_probability + self.config.stall_probability:
            self._stall(process, long=self.rng.random() < 0.5)

    def before_request(self, actor: Actor, op: str, key: str) -> None:
        """Count the request in its actor's phase; an aimed fault strikes here, before it is sent."""
        phase = self._phases.get(actor)
        if phase is None:
            return
        phase[1] = int(phase[1]) + 1
        if not self.chaos_on or actor.process.kind == "producer":
            return
        aims = (self.config.aim, *self.config.more_aims)
        for index, aim in enumerate(aims):
            if aim is not None and self._aimed(aim, index, phase, op, key):
                self._strike(aim, actor, op, key, int(phase[1]))
                return

    def _aimed(self, aim: Aim, index: int, phase: list[str | int], op: str, key: str) -> bool:
        if aim.phase != phase[0] or self._aim_hits[index] >= aim.hits:
            return False
        if aim.op is None and aim.request != phase[1]:
            return False
        if aim.op is not None and not (op.startswith(aim.op) and key.startswith(aim.key)):
            return False
        self._aim_hits[index] += 1
        return True

    def _strike(self, aim: Aim, actor: Actor, op: str, key: str, request: int) -> None:
        self.counts[f"aimed_{aim.action}"] += 1
        self.counts[struck_key(aim.phase, request, aim.action)] += 1
        if actor.name.endswith(OVERLAPPED):
            self.counts[f"aimed_overlapped_{aim.action}"] += 1
        self.ledger.note(f"aimed fault: {aim.action} before {op} {key} ({aim})")
        if self.on_aim is not None:
            self.on_aim(self, actor)
        if aim.action is AimAction.CRASH:
            self._crash(actor.process)
        else:
            pause = None if aim.pause is None else aim.pause * self.config.visibility_timeout
            self._stall(actor.process, long=aim.action is AimAction.LONG_STALL, pause=pause)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Label the current actor's requests as part of transition ``name`` (for aimed faults)."""
        actor = self.scheduler.current
        assert actor is not None
        outer = self._phases.get(actor)
        self._phases[actor] = [name, 0]
        operator = actor.process.kind in OPERATORS
        self.operating += operator
        try:
            yield
        finally:
            self.operating -= operator
            if outer is None:
                self._phases.pop(actor, None)
            else:
                self._phases[actor] = outer

    def restart_phase(self, name: str) -> None:
        """The current actor's next requests are those of a new transition ``name``.

        For a loop of shipped code that enters one transition after another
        (the drain settling job after job, a heartbeat renewing) without a
        ``phase`` of its own around each.
        """
        actor = self.scheduler.current
        assert actor is not None
        self._phases[actor] = [name, 0]

    def phase_of(self, actor: Actor) -> str | None:
        """The transition ``actor``'s requests count in now, if any."""
        phase = self._phases.get(actor)
        return None if phase is None else str(phase[0])

    def share_phase(self, parent: Actor, child: Actor) -> None:
        """``child`` (an overlapped request of ``parent``) counts its requests in ``parent``'s phase."""
        phase = self._phases.get(parent)
        if phase is not None:
            self._phases[child] = phase  # the same list: one count of the transition's requests

    def end_phase(self, child: Actor) -> None:
        self._phases.pop(child, None)

    def ledger_actor_died(self, actor: Actor, exc: Exception) -> None:
        self.ledger.actor_died(actor, exc)

    def checkpoint_current(self) -> None:
        actor = self.scheduler.current
        assert actor is not None
        self.checkpoint(actor)

    # -- processes --------------------------------------------------------

    def start(self, kind: str, delay: float = 0.0) -> Process:
        number = next(self._numbers)
        process = self.scheduler.new_process(
            f"{kind}-{number}", kind, clock_offset=self.rng.uniform(0, 1000)
        )
        self.skews[process] = self.rng.uniform(-self.config.clock_skew, self.config.clock_skew)
        bodies: dict[str, ActorBody] = {
            "producer": self.model.producer,
            "worker": self.model.worker,
            "reaper": self.model.reaper,
            "redriver": actors.redriver,
            "canceller": actors.canceller,
        }
        for extra in self.extras:  # kinds of process an extra adds (``named.EventWorkers``)
            bodies.update(getattr(extra, "bodies", {}))
        body = bodies[kind]
        self.scheduler.spawn(process, process.name, lambda: body(self, process), delay)
        return process

    def wall_clock(self, process: Process) -> float:
        """``process``'s wall clock in simulated seconds: server time plus its skew."""
        return self.scheduler.now + self.skews.get(process, 0.0)

    def clock(self, process: Process) -> ProcessClock:
        """``process``'s ``Clock``: its monotonic clock, and ``wall_clock`` as its ``now``."""
        return ProcessClock(self.scheduler, process.clock_offset, skew=self.skews.get(process, 0.0))

    def _crash(self, process: Process) -> None:
        self.ledger.process_crashed(process)
        self.start(process.kind, delay=self.rng.uniform(0.05, self.config.visibility_timeout))
        self.scheduler.crash(process)

    def _stall(self, process: Process, *, long: bool, pause: float | None = None) -> None:
        """Freeze ``process``: past its lease (``long``), or for less than one lease."""
        vt = self.config.visibility_timeout
        if pause is None:
            pause = vt * (self.rng.uniform(1.1, 3.0) if long else self.rng.uniform(0.05, 1.0))
        until = self.scheduler.now + pause
        self.counts["stalls"] += 1
        self.counts["stalls_long" if long else "stalls_short"] += 1
        self.ledger.note(f"process {process.name} stalls until t={until:.3f}")
        self.scheduler.freeze(process, until)
        self.last_stall_end = max(self.last_stall_end, until)
        self.scheduler.sleep(0)

    # -- jobs -------------------------------------------------------------

    def handler_outcome(self, job_id: str, attempt: int, life: int = 0) -> tuple[float, bool]:
        """How long the handler runs and whether it raises; fixed per (job, attempt, life)."""
        if self.outcomes is not None:
            return self.outcomes(job_id, attempt, life)
        key = (job_id, attempt, life)
        if key not in self._outcomes:
            vt = self.config.visibility_timeout
            if self.rng.random() < self.config.long_handler_probability:
                duration = self.rng.uniform(vt, 3 * vt)
            else:
                duration = self.rng.uniform(0.0, vt / 2)
            self._outcomes[key] = (duration, self.rng.random() < self.config.fail_probability)
        return self._outcomes[key]

    def handling(self, job_id: str) -> None:
        """The user's code that an extra gives the handler of ``job_id`` (``Graphs.handling``)."""
        for extra in self.extras:
            hook = getattr(extra, "handling", None)
            if hook is not None:
                hook(self, job_id)

    def renews_in_handler(self, job_id: str) -> bool:
        """Whether the handler of ``job_id`` renews its lease itself (a fan-out's first write)."""
        return any(
            getattr(extra, "renews_in_handler", lambda job: False)(job_id) for extra in self.extras
        )

    # -- the run ----------------------------------------------------------

    def quiet(self) -> bool:
        live = self.ledger.live
        return (
            self.producer_done
            and live[QUEUE] == 0
            and live[RUN] == 0
            and self.ledger.terminal == self.ledger.enqueued
            and self.ledger.open_executions == 0
            and self.scheduler.now >= self.last_stall_end
            and all(extra.quiet(self) for extra in self.extras)
            and not self._redrives_due()
        )

    def _redrives_due(self) -> bool:
        """While chaos lasts, a dead job the operator will still redrive keeps the run going."""
        if not (self.chaos_on and self.config.redrive_budget and self.model.rules is Rules.PAIL):
            return False
        if self.operating:
            return True  # a redrive or cancel under way: let it finish under chaos
        budget = self.config.redrive_budget
        return any(
            job.dead and self.redrives_left.get(job_id, budget) > 0
            for job_id, job in self.ledger.jobs.items()
        )

    def run(self) -> Outcome:
        # pail logs every retry and reclaim; thousands of runs need none of it.
        # (Its modules' loggers are children of "pail": the level silences them all.)
        logger = logging.getLogger("pail")
        was_disabled, logger.disabled = logger.disabled, True
        level = logger.level
        logger.setLevel(logging.CRITICAL + 1)
        try:
            return self._run()
        finally:
            logger.disabled = was_disabled
            logger.setLevel(level)

    def _job_ids(self) -> Iterator[str]:
        """``Pail.enqueue``'s ids in this run: fixed, in order, and each known to the ledger."""
        for index in count():
            job_id = actors.sim_job_id(index)
            for extra in self.extras:  # -- limits hook: a world with groups names them in ids
                job_id = getattr(extra, "job_id", lambda _, same: same)(index, job_id)
            self.ledger.expect(job_id)
            yield job_id

    def _run(self) -> Outcome:
        ids = self._job_ids()
        # ULIDs carry the wall clock and randomness; a replayable run needs its own.
        real_new_job_id = getattr(pail_queue, "new_job_id")  # noqa: B009 - not re-exported
        setattr(pail_queue, "new_job_id", lambda: next(ids))  # noqa: B010
        # A promotion is a transition of its own inside a claim: label it for aimed faults.
        real_promote = delay.promote

        def promote(*args: Any, **kwargs: Any) -> str | None:
            with self.phase("promote"):
                return real_promote(*args, **kwargs)

        delay.promote = promote
        # -- limits hook (tests/simulation/limits.py): a world without the limits family
        # reads no limits and recovers no slot, so its seed makes the requests it made
        # before limits existed (the pinned seeds stay what they pin).
        with_limits = any(getattr(extra, "has_limits", False) for extra in self.extras)
        reads, recovers = limit_gate.READS, limit_slots.RECOVERS
        limit_gate.READS = limit_slots.RECOVERS = with_limits
        try:
            return self._simulate()
        finally:
            setattr(pail_queue, "new_job_id", real_new_job_id)  # noqa: B010
            delay.promote = real_promote
            limit_gate.READS, limit_slots.RECOVERS = reads, recovers

    def _simulate(self) -> Outcome:
        config = self.config
        scheduler = self.scheduler
        self.start("producer")
        for _ in range(config.workers):
            self.start("worker")
        for _ in range(config.reapers):
            self.start("reaper")
        if config.redrive_budget and self.model.rules is Rules.PAIL:
            self.start("redriver")
        if config.cancel_share and self.model.rules is Rules.PAIL:
            self.start("canceller")
        for extra in self.extras:
            extra.start(self)
        scheduler.run(self.quiet, max_steps=MAX_STEPS, until=config.chaos_duration)
        self.chaos_on = False
        self.store.faults_enabled = False
        limit = config.chaos_duration + 60 * config.visibility_timeout
        margin = 3 * config.visibility_timeout + config.latency.tail_high
        for _ in range(SETTLE_ROUNDS):
            scheduler.run(self.quiet, max_steps=MAX_STEPS, until=limit)
            # Quiet now; a zombie that wakes late may still write: run on a while.
            scheduler.run(lambda: False, max_steps=MAX_STEPS, until=scheduler.now + margin)
            if self.quiet() or scheduler.now >= limit or scheduler.steps >= MAX_STEPS:
                break
        self.ledger.check_quiescent()
        for extra in self.extras:
            extra.check(self)
        scheduler.shutdown()
        violations = self.ledger.violations
        jobs = {v.job_id for v in violations}
        counts = self.ledger.summary() + self.counts
        counts["requests"] = self.store.requests
        return Outcome(
            seed=config.seed,
            model=self.model.name,
            replay_flags=self.replay_flags,
            config=config,
            violations=list(violations),
            counts=counts,
            faults=Counter(self.store.injected),
            sim_time=scheduler.now,
            steps=scheduler.steps,
            trace=self.ledger.trace(jobs if violations else set(self.ledger.jobs))
            if violations or self.full_trace
            else [],
        )


def model_named(name: str) -> Model:
    """``pail`` (the protocol under test, its worker loop as shipped) or ``original``.

    ``original`` is pailq 0.1.1, the known-bad model.
    """
    if name == PAIL.name:
        return PAIL
    if name == "original":
        from tests.simulation import original_model

        return original_model.model()
    raise ValueError(f"unknown model {name!r}: use 'pail' or 'original'")


def sharded_config(config: SimConfig) -> SimConfig:
    """``config`` on a sharded queue that grows mid-run: 2 or 4 shards, then 1x, 2x or 4x that.

    Drawn from its own generator, so the rest of the seed's run is unchanged.
    """
    rng = random.Random(f"shards-{config.seed}")
    shards = rng.choice([2, 4])
    return replace(config, shards=shards, grown_shards=shards * rng.choice([1, 2, 4]))


def run_seed(
    seed: int,
    model: Model = PAIL,
    *,
    chaos: bool = True,
    full_trace: bool = False,
    hostile: bool = False,
    sharded: bool = False,
    pausing: bool = False,
    limits: bool = False,
) -> Outcome:
    """Simulate the run of ``seed`` and check every invariant; see the module docstring.

    The outcome's trace holds the events of the jobs involved in a failure
    (every event with ``full_trace``). With ``hostile``, foreign writers
    drawn from the seed join the run (``tests/simulation/hostile.py``); with
    ``pausing``, an operator pauses and resumes the queue (``tests/simulation/pausing.py``);
    with ``limits``, the queue has concurrency limits (``tests/simulation/limits.py``: a share
    of the seeds has them anyway).

    >>> run_seed(1).failed
    False
    """
    extras: list[Extra] = [*extras_for(seed)] if hostile and model is PAIL else []
    if pausing and model is PAIL:
        extras.append(pauser_for(seed))
    # -- feature hooks: the main sweep's seeds that include a feature's actors ------------
    # One marked line per feature: it draws from a stream of its own
    # (``random.Random(f"NAME-{seed}")``, never ``world.rng``) whether this seed's world
    # has its actors, and appends its ``Extra``; a seed that draws none runs as before.
    # -- limits hook: a share of the seeds' worlds have concurrency limits (``limits.py``).
    limited = limits_for(seed, forced=limits) if model.rules is Rules.PAIL else None
    if limited is not None:
        extras.append(limited)
    # Schedules join the whole model: a share of the seeds' worlds tick (``ticking.py``).
    ticking = ticking_for(seed) if model.rules is Rules.PAIL else None
    if ticking is not None:
        extras.append(ticking)
    # -- dependencies hook: a share of the seeds' worlds have dependency graphs (``dependencies.py``).
    graphs = graphs_for(seed) if model.rules is Rules.PAIL else None
    if graphs is not None:
        extras.append(graphs)
    # -- end of the feature hooks ----------------------------------------------------------
    config = SimConfig.for_seed(seed, chaos=chaos)
    if sharded:
        config = sharded_config(config)
    world = World(config, model, full_trace=full_trace, extras=extras)
    flags = {
        "--calm": not chaos,
        "--hostile": hostile,
        "--sharded": sharded,
        "--pausing": pausing,
        "--limits": limits,
    }
    world.replay_flags = "".join(f" {flag}" for flag, on in flags.items() if on)
    with installed(ticking):
        return world.run()
