"""An operator who pauses and resumes the queue while workers, reapers and chaos run.

The pauser (a process that never crashes: it stands for a person) calls
``Pail.pause`` and ``Pail.resume`` at random times while chaos is on, retrying
on storage errors, and resumes for good when chaos ends, so the run can get
quiet. Its invariant, checked at every write the store applies:

* **No claim after a refill saw the pause.** From the moment the marker
  exists, a worker process whose listing of ``queue/`` was applied after
  that moment (its next refill, which then HEADs the marker) creates no
  lease (``run/{id}``, a claim or a quarantine) until the queue is resumed.
  Jobs claimed before go on; a claim walking an older page may still take
  a job (the pause is honoured within one refill, ``docs/protocol.md``).

The ledger's invariants keep holding for every job across pauses and
resumes with crashes (nothing lost, no parallel run, one outcome), and
quiescence needs every job terminal: nothing is stuck behind a pause.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pail.errors import StorageError
from pail.keys import QUEUE, RUN
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process

if TYPE_CHECKING:
    from tests.simulation.harness import World

TRIES = 100


@dataclass
class Pauser:
    """The pausing operator of one run, and the pause as the store saw it."""

    rng: random.Random
    paused: bool = False
    refilled: set[Process] = field(default_factory=set)
    """Worker processes whose listing of ``queue/`` was applied while the current pause stood."""
    done: bool = False

    # -- the harness's hooks ----------------------------------------------

    def start(self, world: World) -> None:
        process = world.scheduler.new_process("pauser", "producer")  # never crashes
        world.scheduler.spawn(process, "pauser", lambda: self._operate(world, process))

    def quiet(self, world: World) -> bool:
        return self.done and world.store.peek(world.keys.paused()) is None

    def check(self, world: World) -> None:
        """Nothing left to check at the end: the claim rule is checked at every write."""

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        if (
            self.paused
            and op == "LIST"
            and key == world.keys.prefix(QUEUE)
            and outcome == "ok"
            and actor is not None
            and actor.process.kind == "worker"
            and actor.process not in self.refilled
        ):
            self.refilled.add(actor.process)
            world.counts["pause_refills"] += 1

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        if key == world.keys.paused():
            self.paused = after is not None
            self.refilled = set()
            return
        created = before is None and after is not None and key.startswith(world.keys.prefix(RUN))
        if created and self.paused and actor is not None and actor.process in self.refilled:
            job_id = key.removeprefix(world.keys.prefix(RUN))
            world.ledger.violate(
                Kind.PAUSE,
                job_id,
                f"{actor.process.name} claimed {key} while paused, after a refill that saw the pause",
            )

    # -- the operator ------------------------------------------------------

    def _operate(self, world: World, process: Process) -> None:
        vt = world.config.visibility_timeout
        pail = Pail(world.store, visibility_timeout=vt, owner=process.name)
        while world.chaos_on:
            world.scheduler.sleep(self.rng.uniform(0.0, 2 * vt))
            self._retry(world, lambda: pail.pause("simulated"))
            world.counts["pauses"] += 1
            world.scheduler.sleep(self.rng.uniform(0.1, 3 * vt))
            self._retry(world, pail.resume)
        self._retry(world, pail.resume)
        self.done = True

    def _retry(self, world: World, call: Callable[[], object]) -> None:
        for _ in range(TRIES):
            try:
                call()
                return
            except StorageError as exc:
                world.ledger.note(f"pauser: {exc}; trying again")
                world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
        raise AssertionError("the pauser could not pause or resume in 100 tries")


def pauser_for(seed: int) -> Pauser:
    """The pauser of seed ``seed``'s run, drawn apart from the run's own randomness."""
    return Pauser(random.Random(f"pauser-{seed}"))
