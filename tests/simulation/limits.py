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
"""

from __future__ import annotations

import random
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
from pail.protocol.limits import slots as limit_slots
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process

if TYPE_CHECKING:
    from tests.simulation.harness import World

SHARE = 0.05
"""The share of a sweep's seeds whose world has limits."""
TRIES = 100
QUEUE_LIMITS = (1, 2, 3, 5)
GROUP_LIMITS = (1, 2, 3)
FOREIGN_LIMITS = (b"not json", b'{"v": 1, "concurrency": -3}', b"[]", b'{"v": 9}')
FOREIGN_SLOTS = (b"garbage", b"{}", b'{"v": 1, "job": 7}')


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

    # -- the harness's hooks ----------------------------------------------

    def job_id(self, index: int, job_id: str) -> str:
        """The run's job ids: in a world with groups, ``{id}~g{n}`` (group 0 is the big one)."""
        if not self.groups:
            return job_id
        rng = random.Random(f"limits-group-{index}")
        group = 0 if rng.random() < 0.6 else rng.randrange(1, self.groups)
        return f"{job_id}{limit_groups.MARK}g{group}"

    def start(self, world: World) -> None:
        limits = limit_config.Limits(
            concurrency=self.rng.choice(QUEUE_LIMITS),
            group_concurrency=self.rng.choice(GROUP_LIMITS) if self.groups else None,
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
        if key.startswith(world.keys.prefix(RUN)) or _slot_shaped(world, key):
            self._check_live(world)

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

    # -- the operator ----------------------------------------------------------

    def _operate(self, world: World, process: Process) -> None:
        vt = world.config.visibility_timeout
        pail = Pail(world.store, visibility_timeout=vt, owner=process.name)
        while world.chaos_on:
            world.scheduler.sleep(self.rng.uniform(0.5 * vt, 3 * vt))
            roll = self.rng.random()
            if roll < 0.15 and not self.groups:
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
    return LimitWorld(rng, groups=rng.choice([0, 0, 2, 3, 5]))
