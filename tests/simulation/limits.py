"""Concurrency limits under the full fault model: a limit operator, groups, foreign bytes.

A world with limits (``limits_for``: a share of every sweep's seeds, or all
of ``test_limits_sim.py``'s) starts with a queue limit (and, in a world with
groups, a limit for every group) planted in the bucket before anything runs,
so every claim of the run must hold its slots. A limit operator (a process
that never crashes: it stands for a person) changes the limits while chaos
is on; in a world without groups it also writes foreign bytes over the
limits object now and then (the queue then runs one job at a time), and in
any world foreign bytes at a slot's key and at keys under ``_pail/slots/``
that are no slot's. Job ids carry their group (``{id}~g{n}``, one big group
and a few small ones). Workers, reapers and every other actor crash and
stall at every request as in any seed. The invariants, as
``docs/protocol.md`` ("Limits") states them, checked at every write the
store applies:

* **L1 (a live handler holds its slots)**: every handler whose lease is
  alive (its ``run/{id}`` holds its process's lease, ``running``, not
  ``reaped``) has, in the bucket, a slot that names that lease under the
  queue's scope, and in a world with groups one under its group's. A slot
  names one lease, so this is "never more than N live handlers" where N is
  the number of slot indices in use; and the count itself never exceeds the
  largest limit set in the run (``Kind.LIMIT``).
* **L2 (no slot lost for good)**: the run is not quiet while any slot is
  held, and at its end no slot-shaped key is left (``Kind.SLOT_LOST``): every
  slot of a dead worker, of a claim that stopped half-way, or of foreign
  bytes was recovered.
* **No job starved while slots are free**: quiescence, which every run
  checks (every job terminal, ``Kind.STUCK`` otherwise), with the limits in
  force to the end.

Half of these worlds have a queue **rate limit** too (``RATES``; the
operator changes it now and then, never to foreign bytes: an unreadable
limits object holds no rate). Checked at every write and at the end, as
``docs/limits.md`` ("Rate limits") states it (``Kind.RATE``):

* **every start is granted by a token**: each handler start is matched to
  its own start token, written by its process between its claim's start
  and the handler's start, applied by the store inside the window its key
  names (no token serves two starts);
* **a token is one start's**: no token key is written over;
* **no window grants more than its rate**: a window's in-window tokens
  number at most the largest rate set for its period.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pail.codec import RUNNING, LeaseRecord
from pail.errors import DecodeError, StorageError
from pail.ids import new_token
from pail.keys import RUN
from pail.protocol.limits import config as limit_config
from pail.protocol.limits import groups as limit_groups
from pail.protocol.limits import rate as limit_rate
from pail.protocol.limits import slots as limit_slots
from pail.protocol.limits.rate import QUEUE_SCOPE, Rate, RateLimits
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process
from tests.simulation.sim_store import EPOCH

if TYPE_CHECKING:
    from tests.simulation.harness import World
    from tests.simulation.invariants import Execution

SHARE = 0.05
"""The share of a sweep's seeds whose world has limits."""
TRIES = 100
QUEUE_LIMITS = (1, 2, 3, 5)
GROUP_LIMITS = (1, 2, 3)
FOREIGN_LIMITS = (b"not json", b'{"v": 1, "concurrency": -3}', b"[]", b'{"v": 9}')
FOREIGN_SLOTS = (b"garbage", b"{}", b'{"v": 1, "job": 7}')
RATE_SHARE = 0.5
"""The share of the worlds with limits that have a queue rate limit too."""
RATES = (Rate(1, 1), Rate(2, 1), Rate(3, 2))


@dataclass
class LimitWorld:
    """The limits of one run, the operator who changes them, and what the store holds of them."""

    rng: random.Random
    groups: int
    """Groups of the run's jobs (0: ungrouped jobs, and foreign bytes over the limits object)."""
    has_limits: bool = True
    """Read by the harness's limits hook: this world reads limits and recovers slots."""
    largest: int = 0
    """The largest queue limit set in the run (foreign bytes count as 1)."""
    slots: dict[str, StoredObject] = field(default_factory=dict)
    """Every slot-shaped key the store holds now."""
    done: bool = False
    peak: int = 0
    rate: Rate | None = None
    """The queue's rate limit at the start (None: a world without one)."""
    largest_rate: dict[int, int] = field(default_factory=dict)
    """The largest count set for each period (seconds) in the run."""
    granted: dict[str, list[float]] = field(default_factory=dict)
    """Each process's in-window start tokens not yet matched to a start: when each was applied."""
    in_window: Counter[tuple[int, int]] = field(default_factory=Counter)
    """In-window tokens of each (period, window)."""
    matched: set[int] = field(default_factory=set)
    """The ``id`` of every execution already matched to its token."""

    # -- the harness's hooks ----------------------------------------------

    def job_id(self, index: int, job_id: str) -> str:
        """The run's job ids: in a world with groups, ``{id}~g{n}`` (group 0 is the big one)."""
        if not self.groups:
            return job_id
        rng = random.Random(f"limits-group-{index}")
        group = 0 if rng.random() < 0.6 else rng.randrange(1, self.groups)
        return f"{job_id}{limit_groups.MARK}g{group}"

    def start(self, world: World) -> None:
        extra: dict[str, object] = {}
        if self.rate is not None:
            self.largest_rate[self.rate.per] = self.rate.max
            extra["rate"] = RateLimits(queue=self.rate).to_json()
        limits = limit_config.Limits(
            concurrency=self.rng.choice(QUEUE_LIMITS),
            group_concurrency=self.rng.choice(GROUP_LIMITS) if self.groups else None,
            extra=extra,
        )
        self.largest = limits.concurrency or 0
        world.store.plant(world.keys.limits(), limits.encode(new_token()))
        process = world.scheduler.new_process("limiter", "producer")  # never crashes
        world.ledger.foreign_writers.add(process)  # its foreign bytes may repeat
        world.scheduler.spawn(process, "limiter", lambda: self._operate(world, process))

    def quiet(self, world: World) -> bool:
        return self.done and not self.slots

    def check(self, world: World) -> None:
        world.counts["limits_peak_running"] = max(world.counts["limits_peak_running"], self.peak)
        self._check_starts(world)
        for key in sorted(self.slots):
            world.ledger.violate(Kind.SLOT_LOST, key, f"slot {key} is still held at the end")

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        if key.startswith(world.keys.slots()) and op in ("PUT", "DELETE") and outcome == "412":
            world.counts["slot_writes_lost"] += 1

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        if _slot_shaped(world, key):
            if after is None:
                self.slots.pop(key, None)
                world.counts["slots_freed"] += 1
            else:
                self.slots[key] = after
                world.counts["slots_written"] += before is None
        if self.rate is not None and key.startswith(world.keys.rate_tokens()):
            self._token_written(world, key, before, after)
        if key.startswith(world.keys.prefix(RUN)) or _slot_shaped(world, key):
            self._check_live(world)
            self._check_starts(world)

    # -- the invariants ------------------------------------------------------

    def _check_live(self, world: World) -> None:
        held: dict[tuple[str, str], set[str]] = {}
        """(job, lease token) -> the scopes of the slots that name it."""
        for key, slot in self.slots.items():
            try:
                record = limit_slots.SlotRecord.decode(slot.body)
            except DecodeError:
                continue
            scope = "queue" if key.startswith(limit_slots.scope(world.keys)) else "group"
            held.setdefault((record.job_id, record.lease), set()).add(scope)
        live = 0
        for job_id, job in world.ledger.jobs.items():
            for execution in job.executions:
                if execution.end is not None:
                    continue
                token = _live_lease(world, job_id, execution.process.name)
                if token is None:
                    continue
                live += 1
                scopes = held.get((job_id, token), set())
                # A job of a group (its id says) holds its group's slot too.
                grouped = self.groups and limit_groups.group_of(job_id) is not None
                wanted = {"queue", "group"} if grouped else {"queue"}
                if not wanted <= scopes:
                    world.ledger.violate(
                        Kind.LIMIT,
                        job_id,
                        f"{execution.label()} runs with a live lease (token {token}) "
                        f"but holds slots of {sorted(scopes)}, not {sorted(wanted)}",
                    )
        self.peak = max(self.peak, live)
        if live > self.largest:
            world.ledger.violate(
                Kind.LIMIT,
                "-",
                f"{live} handlers run with live leases; the largest limit set was {self.largest}",
            )

    def _token_written(
        self, world: World, key: str, before: StoredObject | None, after: StoredObject | None
    ) -> None:
        token = limit_rate.parse_token_key(world.keys, key)
        if token is None or token.scope != QUEUE_SCOPE or after is None:
            return  # a sweep's delete, or a key no start counts
        if before is not None:
            world.ledger.violate(Kind.RATE, "-", f"rate token {key} written over")
            return
        applied = EPOCH.timestamp() + world.scheduler.now
        if int(applied) // token.per != token.window:
            world.counts["rate_tokens_misfiled"] += 1
            return  # its taker reads the window from the response and starts nothing
        world.counts["rate_tokens"] += 1
        self.in_window[(token.per, token.window)] += 1
        allowed = self.largest_rate.get(token.per, 0)
        if self.in_window[(token.per, token.window)] > allowed:
            world.ledger.violate(
                Kind.RATE,
                "-",
                f"window {token.window} of {token.per} s granted "
                f"{self.in_window[(token.per, token.window)]} starts; the largest rate was {allowed}",
            )
        self.granted.setdefault(_taker(after.body), []).append(world.scheduler.now)

    def _check_starts(self, world: World) -> None:
        """Match every new handler start to a token of its process taken during its claim."""
        if self.rate is None:
            return
        fresh = sorted(
            (
                execution
                for job in world.ledger.jobs.values()
                for execution in job.executions
                if id(execution) not in self.matched
            ),
            key=lambda execution: execution.start,
        )
        for execution in fresh:
            self.matched.add(id(execution))
            if not self._take(execution):
                world.ledger.violate(
                    Kind.RATE,
                    execution.job_id,
                    f"{execution.label()} started with no start token of its own taken by its "
                    f"claim (from {execution.claim_started:.3f} s)",
                )

    def _take(self, execution: Execution) -> bool:
        times = self.granted.get(execution.process.name, [])
        for index, at in enumerate(times):
            if execution.claim_started <= at <= execution.start:
                del times[index]
                return True
        return False

    # -- the operator ----------------------------------------------------------

    def _operate(self, world: World, process: Process) -> None:
        vt = world.config.visibility_timeout
        pail = Pail(world.store, visibility_timeout=vt, owner=process.name)
        while world.chaos_on:
            world.scheduler.sleep(self.rng.uniform(0.5 * vt, 3 * vt))
            roll = self.rng.random()
            if roll < 0.15 and not self.groups and self.rate is None:
                body = self.rng.choice(FOREIGN_LIMITS)
                self._retry(world, partial(world.store.put, world.keys.limits(), body))
                self.largest = max(self.largest, limit_config.FOREIGN_CONCURRENCY)
                world.counts["limits_foreign"] += 1
            elif roll < 0.3:
                index = self.rng.randrange(self.largest)
                key = limit_slots.slot_key(limit_slots.scope(world.keys), index)
                body = self.rng.choice(FOREIGN_SLOTS)
                self._retry(world, partial(_create, world, key, body))
                world.counts["slots_foreign"] += 1
            elif roll < 0.35:
                key = f"{world.keys.slots()}queue/notes.txt"
                self._retry(world, partial(world.store.put, key, b"left by someone"))
            else:
                self._set(world, pail)
        self._set(world, pail)  # a sane limit to drain under
        self.done = True

    def _set(self, world: World, pail: Pail) -> None:
        limit = self.rng.choice(QUEUE_LIMITS)
        self.largest = max(self.largest, limit)
        self._retry(world, lambda: pail.set_limit(limit))
        if self.groups:
            group_limit = self.rng.choice(GROUP_LIMITS)
            self._retry(world, lambda: pail.set_limit(group_limit, group=limit_groups.DEFAULT))
        if self.rate is not None and self.rng.random() < 0.3:
            rate = self.rng.choice(RATES)
            self.largest_rate[rate.per] = max(self.largest_rate.get(rate.per, 0), rate.max)
            self._retry(world, lambda: pail.set_rate(rate))
            world.counts["rate_changes"] += 1
        world.counts["limit_changes"] += 1

    def _retry(self, world: World, call: Callable[[], object]) -> None:
        for _ in range(TRIES):
            try:
                call()
                return
            except StorageError as exc:
                world.ledger.note(f"limiter: {exc}; trying again")
                world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
        raise AssertionError("the limiter could not write in 100 tries")


def _create(world: World, key: str, body: bytes) -> None:
    """Foreign bytes at a free slot index (create-only: a foreign writer never overwrites a holder's)."""
    try:
        world.store.put(key, body, if_none_match=True)
    except StorageError:
        if world.store.peek(key) is None:
            raise


def _slot_shaped(world: World, key: str) -> bool:
    root = world.keys.slots()
    if not key.startswith(root):
        return False
    return limit_slots.index_of(key, key[: key.rfind("/") + 1]) is not None


def _taker(body: bytes) -> str:
    """The process that wrote a start token (its ``by``), or "" for bytes that name none."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    taker = data.get("by") if isinstance(data, dict) else None
    return taker if isinstance(taker, str) else ""


def _live_lease(world: World, job_id: str, owner: str) -> str | None:
    """The lease token of ``owner``'s lease on ``job_id`` if it is alive in the store, else None."""
    for layout in world.keys.layouts(job_id):
        found = world.store.peek(layout.run(job_id))
        if found is None:
            continue
        try:
            record = LeaseRecord.decode(found.body, job_id)
        except DecodeError:
            return None
        alive = record.owner == owner and record.state == RUNNING and not record.reaped
        return record.lease if alive else None
    return None


def limits_for(seed: int, *, forced: bool = False) -> LimitWorld | None:
    """The limits of seed ``seed``'s world, or None (most seeds), drawn apart from the run's randomness."""
    # Its own draw, whose salt no seed pinned in regressions.py draws (their runs stay theirs).
    if not forced and random.Random(f"limits-world-{seed}").random() >= SHARE:
        return None
    rng = random.Random(f"limits-{seed}")
    world = LimitWorld(rng, groups=rng.choice([0, 0, 2, 3, 5]))
    # Its own stream again: the rate's draw leaves every other draw of the world as it was.
    rated = random.Random(f"limits-rate-{seed}")
    if rated.random() < RATE_SHARE:
        world.rate = rated.choice(RATES)
    return world
