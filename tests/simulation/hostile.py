"""Foreign writers in the simulation: hostile objects in every prefix, and pailq 0.1.1's producer.

Two extra actors join a run (``harness.World(extras=...)``), both from
processes that never crash (they stand for other systems):

* **the foreign writer** puts, at random times while chaos is on, objects
  pail never writes, under ids no pail job has: every hostile body of
  ``tests/support/hostile.py`` under ``queue/`` (plain ids, a malformed
  delayed key, a due delayed entry), hostile leases under ``run/``, bytes
  under ``done/``, ``dlq/`` and ``keys/``, the console's zero-byte folders
  and nested keys in every prefix; an **operator** reads ``stats``,
  ``dead_letters`` and ``status`` throughout;
* **the pailq 0.1.1 producer** enqueues real jobs (the ledger follows them)
  with the original's bytes: Python's json defaults, bare ``NaN`` included.

Their invariants, checked at quiescence on top of the ledger's (which keep
holding for every real job, the pailq ones included):

* every hostile ``queue/`` entry that names a job is quarantined: gone from
  ``queue/``, with a ``dlq/`` record holding its raw bytes;
* every hostile lease is quarantined or dropped once expired: no ``run/``
  object of it is left;
* keys that name no job (folders, nested keys) and objects no reader moves
  (a delayed entry due in 2286, ``done/``, ``dlq/`` and ``keys/`` bytes)
  are left exactly as written;
* no reader raised anything but a storage error (a violation otherwise);
* a pailq job whose payload holds ``NaN`` ends dead-lettered, with its raw
  bytes (pail writes strict JSON only), unless an operator cancelled it
  first; every other pailq job runs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pail.codec import META_OUTCOME, OUTCOME_CANCELLED, DeadLetter
from pail.errors import ConditionFailedError, DecodeError, StorageError
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process
from tests.support.hostile import LEASE_BODIES, LETTER_BODIES, QUEUE_BODIES

if TYPE_CHECKING:
    from tests.simulation.harness import World

WRITE_TRIES = 50
OPERATOR_PERIOD = 5.0


def hostile_sim_id(number: int) -> str:
    """An id no simulated job has, sorting before all of them ('-' < '0')."""
    return f"-h{number:04d}"


def pailq_sim_id(index: int) -> str:
    """A real job's id for the pailq producer, apart from ``Pail.enqueue``'s."""
    return f"P{index:025d}"


@dataclass
class Foreign:
    """The foreign writer, the operator and the pailq producer of one run, and what they left."""

    rng: random.Random
    objects: int
    pailq_jobs: int
    quarantine: dict[str, str] = field(default_factory=dict)
    """Hostile queue/ entries (key -> job id) that a claim must dead-letter."""
    leases: dict[str, str] = field(default_factory=dict)
    """Hostile run/ objects (key -> job id) the reaper must quarantine or drop."""
    untouched: dict[str, bytes] = field(default_factory=dict)
    """Objects no pail reader may move or change, with their bytes."""
    nan_jobs: set[str] = field(default_factory=set)
    pailq_done: bool = False
    writer_done: bool = False

    # -- the harness's hooks ----------------------------------------------

    def start(self, world: World) -> None:
        """Spawn the actors (processes of kind ``producer``: they never crash)."""
        if self.objects:
            self._spawn(world, "foreign", self._write_all)
            self._spawn(world, "operator", self._operate)
        else:
            self.writer_done = True
        if self.pailq_jobs:
            self._spawn(world, "pailq", self._produce_pailq)
        else:
            self.pailq_done = True

    def quiet(self, world: World) -> bool:
        """Whether every foreign object that must be acted on has been."""
        if not (self.writer_done and self.pailq_done):
            return False
        objects = set(world.store.keys())
        return not any(key in objects for key in (*self.quarantine, *self.leases))

    def check(self, world: World) -> None:
        """The invariants of the module docstring; each breach is a ``FOREIGN`` violation."""
        world.counts["foreign_quarantined"] += len(self.quarantine)
        world.counts["foreign_leases"] += len(self.leases)
        world.counts["foreign_untouched"] += len(self.untouched)
        world.counts["pailq_nan_jobs"] += len(self.nan_jobs)
        objects = set(world.store.keys())
        for key, job_id in self.quarantine.items():
            if key in objects:
                self._violate(world, job_id, f"hostile {key} was never quarantined")
            elif not self._quarantined(world, job_id):
                self._violate(world, job_id, f"hostile {key} left no dlq/ record of its bytes")
        for key, job_id in self.leases.items():
            if key in objects:
                self._violate(world, job_id, f"hostile lease {key} was never reaped")
        for key, body in self.untouched.items():
            current = world.store.peek(key)
            if current is None or current.body != body:
                self._violate(world, key, f"{key}, which names no job to act on, was changed")
        for job_id in self.nan_jobs:
            if not (self._quarantined(world, job_id) or self._cancelled(world, job_id)):
                self._violate(world, job_id, "pailq NaN job not dead-lettered with its bytes")

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        """Nothing to watch per request: the invariants are checked at quiescence."""

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        """Nothing to watch per write: the invariants are checked at quiescence."""

    # -- actors -------------------------------------------------------------

    def _spawn(self, world: World, name: str, body: Callable[[World, Process], None]) -> None:
        process = world.scheduler.new_process(name, "producer")
        if name == "foreign":
            world.ledger.foreign_writers.add(process)
        world.scheduler.spawn(process, name, lambda: body(world, process))

    def _write_all(self, world: World, process: Process) -> None:
        keys = world.keys
        writes = self._plan(world)
        for key, body in writes:
            world.scheduler.sleep(self.rng.uniform(0, world.config.chaos_duration / len(writes)))
            self._put(world, key, body)
        for prefix in ("queue/", "run/", "done/", "dlq/", "keys/"):
            self._put(world, keys.prefix(prefix), b"")
            self.untouched[keys.prefix(prefix)] = b""
        self.writer_done = True

    def _plan(self, world: World) -> list[tuple[str, bytes]]:
        keys = world.keys
        writes: list[tuple[str, bytes]] = []
        for n in range(self.objects):
            job_id = hostile_sim_id(n)
            shape = self.rng.randrange(9)
            if shape <= 2:
                key, body = keys.queue(job_id), self.rng.choice(QUEUE_BODIES).body
                self.quarantine[key] = job_id
            elif shape == 3:
                key, body = keys.queue(f"!soon-{job_id}"), b'{"payload": 1, "attempts": 0}'
                self.quarantine[key] = f"!soon-{job_id}"
            elif shape == 4:
                key, body = (
                    keys.queue(f"!0000000000001-{job_id}"),
                    self.rng.choice(QUEUE_BODIES).body,
                )
                self.quarantine[key] = f"!0000000000001-{job_id}"  # quarantined where it is
            elif shape == 5:
                key, body = keys.run(job_id), self.rng.choice(LEASE_BODIES).body
                self.leases[key] = job_id
            elif shape == 6:
                key, body = keys.dlq(job_id), self.rng.choice(LETTER_BODIES).body
                self.untouched[key] = body
            elif shape == 7:
                key = self.rng.choice(
                    [
                        keys.queue(f"{job_id}/"),
                        keys.queue(f"{job_id}/x.json"),
                        keys.run(f"{job_id}/x"),
                        keys.queue(f"!9999999999999-{job_id}"),
                    ]
                )
                body = b"" if key.endswith("/") else b'{"payload": 1, "attempts": 0}'
                self.untouched[key] = body
            else:
                key = self.rng.choice([keys.done(job_id), keys.dedup(f"{n:064d}")])
                body = self.rng.choice([b"", b"\xff\xfe", b'{"x": NaN}'])
                self.untouched[key] = body
            writes.append((key, body))
        return writes

    def _put(self, world: World, key: str, body: bytes) -> None:
        for _ in range(WRITE_TRIES):
            try:
                world.store.put(key, body)
                return
            except StorageError:
                world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
        raise AssertionError(f"the foreign writer could not write {key}")

    def _operate(self, world: World, process: Process) -> None:
        """An operator's reads, all run long: none may raise anything but a storage error."""
        pail = Pail(world.store, visibility_timeout=world.config.visibility_timeout)
        while True:
            world.scheduler.sleep(OPERATOR_PERIOD * self.rng.uniform(0.5, 1.5))
            job_ids = [*self.quarantine.values(), *self.leases.values()]
            try:
                pail.stats()
                pail.dead_letters(limit=20)
                for job_id in self.rng.sample(job_ids, min(3, len(job_ids))):
                    pail.status(job_id)
            except StorageError:
                continue
            except Exception as exc:  # noqa: BLE001 - the invariant: nothing else escapes a reader
                self._violate(world, "-", f"a reader raised {type(exc).__name__}: {exc}")
                return
            world.counts["operator_reads"] += 1

    def _produce_pailq(self, world: World, process: Process) -> None:
        """pailq 0.1.1's ``enqueue``: create-only PUT of ``json.dumps({"payload", "attempts"})``."""
        for index in range(self.pailq_jobs):
            world.scheduler.sleep(self.rng.uniform(0, world.config.enqueue_window + 0.1))
            job_id = pailq_sim_id(index)
            payload: dict[str, object] = {"n": index}
            if self.rng.random() < 0.3:
                payload["x"] = float("nan")
                self.nan_jobs.add(job_id)
            body = json.dumps({"payload": payload, "attempts": 0}).encode()
            world.ledger.expect(job_id)
            for _ in range(WRITE_TRIES):
                try:
                    world.store.put(world.keys.queue(job_id), body, if_none_match=True)
                    break
                except ConditionFailedError:
                    break  # an earlier try of ours landed (its response was lost)
                except StorageError:
                    world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
            world.counts["pailq_jobs"] += 1
        self.pailq_done = True

    # -- helpers --------------------------------------------------------------

    def _quarantined(self, world: World, job_id: str) -> bool:
        letter = world.store.peek(world.keys.dlq(job_id))
        if letter is None:
            return False
        try:
            return DeadLetter.decode(letter.body, job_id).quarantined
        except DecodeError:
            return False

    def _cancelled(self, world: World, job_id: str) -> bool:
        """An operator cancelled it before a claim reached it: an end as good as any."""
        marker = world.store.peek(world.keys.done(job_id))
        return marker is not None and marker.metadata.get(META_OUTCOME) == OUTCOME_CANCELLED

    def _violate(self, world: World, job_id: str, detail: str) -> None:
        world.ledger.violate(Kind.FOREIGN, job_id, detail)


def extras_for(seed: int) -> list[Foreign]:
    """The foreign actors of seed ``seed``'s run: drawn from the seed alone, apart from its rng."""
    rng = random.Random(f"hostile-{seed}")
    objects = rng.choice([0, 3, 8, 16])
    pailq_jobs = rng.choice([0, 0, 2, 5])
    if not (objects or pailq_jobs):
        return []
    return [Foreign(random.Random(rng.getrandbits(64)), objects, pailq_jobs)]
