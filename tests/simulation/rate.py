"""Rate limits in the simulation: takers racing for start tokens through crashes, stalls and faults.

A seed's world is a simulated bucket (``SimStore``: latency, 5xx, 409s,
responses lost after the write applied, S3's one-second ``Date``), a few
taker processes, and around them:

* **takers** loop ``RateGate.take_all`` over their group's rate and the
  queue's, "run" a job when granted, and wait as told when refused; a taker
  process may crash at any request (a new one takes its place) or freeze for
  seconds between reading the clock and its write landing;
* **a limit changer** changes the queue's rate now and then (its count, and
  sometimes its period), as ``pail limit`` would mid-run;
* **a foreign writer** puts junk under the rate prefix: objects at slot keys,
  nested keys, names that are no slot, bytes that are no JSON;
* **a sweeper** deletes past windows' tokens (``rate.sweep``), as the reaper does.

The invariants, checked at every grant and every refusal, from the store's
own record of when each write was applied (exact simulated time, not the
truncated ``Date`` the takers read):

* **R1, in the window it names**: every token a start holds was written by
  that start's taker (its write token) and applied inside the window its key names;
* **R2, never over the limit**: no window of a scope grants more starts than
  the largest count of the rates its starts were taken under (a taker takes
  under the rate it last read, so a change is honoured from each taker's next take);
* **R3, one start per token**: no token serves two starts;
* **R4, no false "full"**: a refusal that says the current window is full
  is said while the store holds at least R slot tokens of that window.
"""

from __future__ import annotations

import contextlib
import functools
import random
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

from pail.codec import META_WRITE
from pail.errors import StorageError
from pail.keys import Keys
from pail.protocol.limits import rate
from pail.protocol.limits.rate import QUEUE_SCOPE, Rate, RateGate, group_scope
from pail.store.base import StoredObject
from tests.simulation.scheduler import Actor, Process, Scheduler
from tests.simulation.sim_store import EPOCH, FaultRates, Latency, SimStore

KEYS = Keys("rated")
GROUPS = ("g0", "g1", "g2")
RUN_FOR = 30.0
"""Simulated seconds of a seed's run."""


class Kind(StrEnum):
    WINDOW = "R1 token outside the window it names"
    OVER = "R2 more starts than the rate in a window"
    SHARED = "R3 a token serving two starts"
    FALSE_FULL = "R4 refused as full with a free slot"
    LOOP = "an actor's loop raised"


@dataclass(frozen=True, slots=True)
class Violation:
    kind: Kind
    detail: str


@dataclass
class Life:
    """One write of a token key, as the store applied it."""

    write: str
    at: float
    """Exact simulated seconds since the epoch of the run."""


@dataclass
class RateWorld:
    """One seed's world and what it saw."""

    seed: int
    rng: random.Random
    scheduler: Scheduler
    store: SimStore
    queue_rate: Rate | None
    group_rate: Rate | None
    crash_rate: float
    freeze_rate: float
    history: list[tuple[float, Rate | None]] = field(default_factory=list)
    """When the queue's rate changed, and to what."""
    lives: dict[str, list[Life]] = field(default_factory=lambda: defaultdict(list))
    starts: dict[tuple[str, int, int], list[tuple[float, int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    used: set[tuple[str, str]] = field(default_factory=set)
    violations: list[Violation] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    # -- the store's observer ------------------------------------------------

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        if after is not None and key.startswith(KEYS.rate_tokens()):
            self.lives[key].append(Life(after.metadata.get(META_WRITE, ""), self.scheduler.now))

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        self.counts["requests"] += 1

    def checkpoint(self, actor: Actor) -> None:
        process = actor.process
        if process.kind != "taker" or not process.alive:
            return
        roll = self.rng.random()
        if roll < self.crash_rate:
            self.counts["crashes"] += 1
            self.scheduler.crash(process)
        elif roll < self.crash_rate + self.freeze_rate:
            self.counts["freezes"] += 1
            self.scheduler.freeze(process, self.scheduler.now + self.rng.uniform(0.2, 3.0))

    def before_request(self, actor: Actor, op: str, key: str) -> None:
        pass

    # -- the invariants --------------------------------------------------------

    def fail(self, kind: Kind, detail: str) -> None:
        self.violations.append(Violation(kind, f"seed {self.seed}: {detail}"))

    def granted(self, taker: str, take: rate.Take, limits: dict[str, Rate]) -> None:
        now = self.scheduler.now
        for key, write in take.tokens:
            token = rate.parse_token_key(KEYS, key)
            assert token is not None, key
            lives = [life for life in self.lives.get(key, []) if life.write == write]
            if len(lives) != 1:
                self.fail(Kind.WINDOW, f"{taker}'s token {key} has {len(lives)} writes of its own")
                continue
            applied = lives[0].at + EPOCH.timestamp()
            if int(applied) // token.per != token.window:
                self.fail(
                    Kind.WINDOW,
                    f"{taker}'s token {key} (window {token.window}) was applied at "
                    f"{applied:.3f}, window {int(applied) // token.per}",
                )
            if (key, write) in self.used:
                self.fail(Kind.SHARED, f"{key} serves a second start ({taker})")
            self.used.add((key, write))
            bucket = self.starts[(token.scope, token.per, token.window)]
            bucket.append((now, limits[token.scope].max, key))
            # A taker takes under the rate it last read: a change is seen at its next take.
            allowed = max(limit for _, limit, _ in bucket)
            # Two starts on one key (a write that overwrote) count twice: R2 counts starts.
            if len(bucket) > allowed:
                self.fail(
                    Kind.OVER,
                    f"{token.scope} window {token.window} ({token.per}s) granted {len(bucket)} "
                    f"starts, rate {allowed}: {[k.rsplit('/', 1)[-1] for _, _, k in bucket]}",
                )

    def refused_full(self, taker: str, scope: str, limit: Rate, at_window: int) -> None:
        if int(self.scheduler.now + EPOCH.timestamp()) // limit.per != at_window:
            return  # the taker's estimate lags: that window is over (and may be swept)
        prefix = rate.window_prefix(KEYS, scope, limit, at_window)
        stored = self.store.keys()
        slots = [rate.parse_slot(key[len(prefix) :]) for key in stored if key.startswith(prefix)]
        held = sum(1 for slot in slots if slot is not None and slot < limit.max)
        if held < limit.max:
            self.fail(
                Kind.FALSE_FULL,
                f"{taker} refused {scope} window {at_window} as full with {held} of {limit.max}",
            )


@dataclass(frozen=True, slots=True)
class RateResult:
    seed: int
    violations: tuple[Violation, ...]
    counts: dict[str, int]

    @property
    def failed(self) -> bool:
        return bool(self.violations)

    def kinds(self) -> set[Kind]:
        return {v.kind for v in self.violations}

    def report(self) -> str:
        lines = [f"seed {self.seed}: {dict(self.counts)}"]
        lines += [f"  {v.kind}: {v.detail}" for v in self.violations[:10]]
        return "\n".join(lines)


def _taker(world: RateWorld, process: Process, name: str) -> None:
    clock = world.scheduler.clock(process)
    gate = RateGate(
        world.store, KEYS, clock=clock, owner=name, rng=random.Random(world.rng.random())
    )
    group = world.rng.choice(GROUPS)
    while world.scheduler.now < RUN_FOR:
        scopes: list[tuple[str, Rate]] = []
        if world.group_rate is not None:
            scopes.append((group_scope(group), world.group_rate))
        queue_rate = world.history[-1][1]
        if queue_rate is not None:
            scopes.append((QUEUE_SCOPE, queue_rate))
        if not scopes:
            clock.sleep(0.2)
            continue
        try:
            answer = _take(world, gate, name, scopes)
        except StorageError:
            world.counts["storage_errors"] += 1
            clock.sleep(0.1)
            continue
        if answer.granted:
            world.counts["starts"] += 1
            world.granted(name, answer, {scope: limit for scope, limit in scopes})
            clock.sleep(world.rng.uniform(0.0, 0.3))  # the handler runs
        else:
            world.counts["refusals"] += 1
            clock.sleep(answer.wait)


def _take(world: RateWorld, gate: RateGate, name: str, scopes: list[tuple[str, Rate]]) -> rate.Take:
    """``take_all``, with each full refusal checked against the store (R4)."""
    taken: list[rate.Take] = []
    for scope, limit in scopes:
        answer = gate.take(scope, limit)
        if not answer.granted:
            if answer.full:
                window = gate._windows[(scope, limit.per)].window
                world.refused_full(name, scope, limit, window)
            return answer
        taken.append(answer)
    tokens = tuple(token for answer in taken for token in answer.tokens)
    return rate.Take(True, taken[-1].key, taken[-1].granted_at, tokens=tokens)


def _changer(world: RateWorld, process: Process) -> None:
    clock = world.scheduler.clock(process)
    while world.scheduler.now < RUN_FOR:
        clock.sleep(world.rng.uniform(1.0, 6.0))
        current = world.history[-1][1]
        choice = world.rng.random()
        if choice < 0.1:
            new: Rate | None = None
        elif choice < 0.3 or current is None:
            new = Rate(world.rng.choice((1, 2, 3, 5)), world.rng.choice((1, 2, 3)))
        else:
            new = Rate(world.rng.choice((1, 2, 3, 5, 8)), current.per)
        world.history.append((world.scheduler.now, new))
        world.counts["changes"] += 1


JUNK = (b"", b"\xff\xfe", b"{", b'{"v": 1, "w": 7}', b"[" * 50, b"NaN")


def _foreigner(world: RateWorld, process: Process) -> None:
    clock = world.scheduler.clock(process)
    while world.scheduler.now < RUN_FOR:
        clock.sleep(world.rng.uniform(0.5, 4.0))
        limit = world.history[-1][1] or Rate(2, 1)
        window = int(world.scheduler.now + EPOCH.timestamp()) // limit.per + world.rng.choice(
            (0, 1)
        )
        base = rate.window_prefix(KEYS, QUEUE_SCOPE, limit, window)
        name = world.rng.choice(("0000", "0001", "folder/", "0001/x", "abcd", "99999", ""))
        with contextlib.suppress(StorageError):
            world.store.put(base + name, world.rng.choice(JUNK))
        world.counts["foreign"] += 1


def _sweeper(world: RateWorld, process: Process) -> None:
    clock = world.scheduler.clock(process)
    while world.scheduler.now < RUN_FOR:
        clock.sleep(world.rng.uniform(1.0, 5.0))
        try:
            report = rate.sweep(world.store, KEYS, max_deletes=world.rng.choice((5, 50, 1000)))
        except StorageError:
            continue
        world.counts["swept"] += report.deleted


def run_rate_seed(seed: int) -> RateResult:
    """Run one seed's world to its end; its violations, and counts of what happened."""
    rng = random.Random(seed)
    scheduler = Scheduler()
    world = RateWorld(
        seed=seed,
        rng=rng,
        scheduler=scheduler,
        store=None,  # type: ignore[arg-type]  # set just below: the store observes the world
        queue_rate=None,
        group_rate=Rate(rng.choice((1, 2, 4)), rng.choice((1, 2))) if rng.random() < 0.5 else None,
        crash_rate=rng.choice((0.0, 0.005, 0.02)),
        freeze_rate=rng.choice((0.0, 0.01, 0.03)),
    )
    faults = FaultRates(
        transient=rng.choice((0.0, 0.02)),
        conflict=rng.choice((0.0, 0.02)),
        timeout_after_apply=rng.choice((0.0, 0.02, 0.05)),
    )
    world.store = SimStore(scheduler, rng, world, faults=faults, latency=Latency(tail_high=1.5))
    world.history.append((0.0, Rate(rng.choice((1, 2, 3, 5)), rng.choice((1, 1, 2, 3)))))

    def errored(actor: Actor, exc: Exception) -> None:
        world.fail(Kind.LOOP, f"{actor.name}: {exc!r}")

    scheduler.on_error = errored
    takers = rng.randint(2, 8)
    processes: list[Process] = []
    for index in range(takers):
        process = scheduler.new_process(f"taker{index}", "taker", rng.uniform(0, 1000))
        processes.append(process)
        scheduler.spawn(process, "take", functools.partial(_taker, world, process, f"t{index}"))
    helpers = scheduler.new_process("operator", "operator")
    scheduler.spawn(helpers, "changer", lambda: _changer(world, helpers))
    scheduler.spawn(helpers, "foreigner", lambda: _foreigner(world, helpers))
    scheduler.spawn(helpers, "sweeper", lambda: _sweeper(world, helpers))
    respawned = 0

    def restart_the_dead() -> None:
        nonlocal respawned
        for index, process in enumerate(processes):
            if not process.alive and scheduler.now < RUN_FOR:
                respawned += 1
                fresh = scheduler.new_process(
                    f"taker{index}.{respawned}", "taker", rng.uniform(0, 1000)
                )
                processes[index] = fresh
                name = f"t{index}.{respawned}"
                scheduler.spawn(
                    fresh, "take", functools.partial(_taker, world, fresh, name), delay=0.5
                )

    try:
        while scheduler.now < RUN_FOR and scheduler.steps < 200_000:
            steps = scheduler.steps
            scheduler.run(lambda: False, max_steps=scheduler.steps + 200, until=RUN_FOR)
            restart_the_dead()
            if scheduler.steps == steps:
                break
    finally:
        scheduler.shutdown()
    world.counts["takers"] = takers + respawned
    return RateResult(seed, tuple(world.violations), dict(world.counts))
