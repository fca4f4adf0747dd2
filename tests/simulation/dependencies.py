"""Dependency graphs in the whole model: some of the main sweep's worlds have flows and chains.

The main sweep (``harness.run_seed``) draws from each seed whether its world
has dependency graphs (``graphs_for``: about one seed in ``1 / SHARE``; the
family's own sweep, ``test_dependencies_sim.py``, forces them). Such a world
gets an operator (a person: it never crashes, it retries what S3 refused)
who, while chaos lasts, enqueues two to four graphs with ids from the run's
own sequence, so the ledger follows every job of them:

* a **fan-in** (``enqueue_flow``'s writes: the continuation's waiting
  record, then one to four children naming it), ``on_failure`` drawn;
* a **chain** of two or three jobs (``enqueue_chain``'s writes);
* a **late** edge: one or two plain jobs, then, a little later, a job
  ``after`` them (``Pail.enqueue(after=...)``'s writes: the record lists
  them as late, their outcomes are looked at once, and the reaper's pass
  looks at the rest);
* foreign bytes at a ``wait/`` key that names no graph job;
* in about half of these worlds (``FAN_OUT_SHARE``, a stream of its own),
  and only in those that run more than one job at a time (``_fast``), one
  or two **fan-out parents** (an operator of their own): plain jobs whose handler calls ``pail.current_job().fan_out``
  once or twice (``World.handling``), so the worker that runs one crashes
  and stalls at every request of its fan-out (the fenced lease renewal, the
  continuation's waiting record, each child, the last HEAD of the parent's
  ``done/``), and its retries (or its death, or a redrive) follow;
* in about half of these worlds (``keyed_for``, a stream of its own), one or
  two **keyed** late edges (``Pail.enqueue(key=K, after=[...])``'s writes,
  ``dedup.enqueue_keyed``): the operator writes the dependencies, then two
  or three keyed producers (processes of their own, which the world crashes
  and stalls like any other) enqueue the same key after them at random
  times, racing the dependencies' ends and the promotion; the first of
  them, most times, crashes between the key record and the waiting record,
  so a repeat's repair writes the waiting record. A crashed keyed producer
  comes back and repeats every keyed edge.

The workers (the shipped loop), reapers, redrivers and cancellers of the
world act on these jobs like on any other, with their crashes, stalls,
skewed clocks and the bucket's faults. The invariants, as
``docs/dependencies.md`` states them (``Kind.DEPENDENCY``):

* **never before its dependencies** (checked at every write the store
  applies): a first-life pending entry or a lease of a dependent is written
  only while every one of its dependencies has a success under ``done/``;
* **at most once**: a dependent's outcome is written once and it never runs
  on two live leases (the ledger's own rules hold for these jobs too);
* **never waits forever** (checked once the run is quiet, reapers having
  run): a dependent all of whose dependencies ended has an outcome itself,
  and no ``wait/`` record of it is left (a fan-out's continuation waits for
  its children and its parent);
* **no child without its continuation** (once quiet: every attempt of the
  parent has ended): a fan-out child that exists in any state has a
  continuation with a record (``wait/``, ``queue/``, ``run/`` or ``done/``).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import pail
from pail.codec import META_OUTCOME, OUTCOME_SUCCEEDED
from pail.errors import PailError
from pail.keys import DONE, QUEUE, RUN, WAIT, Keys
from pail.protocol import dedup, dependencies
from pail.protocol import layout as layout_marker
from pail.protocol.dependencies.graph import Flow, fan_out_ids, put_waiting
from pail.protocol.dependencies.repair import Repairer
from pail.protocol.enqueue import put_pending
from pail.store.base import Store, StoredObject
from tests.simulation.actors import sim_job_id
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Actor, Process
from tests.support.hooked_store import HookedStore

if TYPE_CHECKING:
    from tests.simulation.harness import World

SHARE = 0.05
"""The share of the main sweep's seeds whose world has dependency graphs."""
FIRST_GRAPH_JOB = 2 * 10**9
"""Graph jobs' ids start here in the run's sequence: apart from the producer's and the ticks'."""
TRIES = 100
REPAIRERS = 2
KEYED_SHARE = 0.5
"""The share of the graph worlds that also have keyed late edges (``enqueue(key=, after=)``)."""
KEYED_PRODUCER = "keyed-producer"
"""The process kind of a keyed producer: not ``producer``, so the world crashes and stalls it."""
FAN_OUT_SHARE = 0.5
"""The share of the graph worlds that also have fan-out parents; the others run as they did
before fan-outs joined, so the seeds pinned in them (main-sweep 7103, 37) still pin."""
FIRST_FAN_OUT = FIRST_GRAPH_JOB + 10**8
"""Fan-out parents' ids: a range of their own, so the other graph jobs keep theirs."""
FAN_OUT_PARENTS = (1, 2)
"""How many fan-out parents a graph world has (drawn from its fan-out stream)."""


@dataclass(frozen=True)
class KeyedEdge:
    """One keyed late edge: the key, the jobs it waits for, and the id its first producer draws."""

    key: str
    after: tuple[str, ...]
    job_id: str
    on_failure: str
    crash_first: bool
    """Whether its first producer crashes between the key record and the waiting record."""


@dataclass(frozen=True)
class FanOut:
    """A job whose handler fans out: the children of each of its ``fan_out`` calls, in order."""

    parent: str
    calls: tuple[int, ...]
    """How many children each call enqueues: the same on every attempt, as a handler's would be."""
    on_failure: str


@dataclass
class Graph:
    """One graph's dependents: each job that waits, and the jobs it waits for."""

    waits: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Graphs:
    """The dependency graphs of one world and their invariant (an ``harness.Extra``)."""

    def __init__(
        self,
        rng: random.Random,
        keyed: random.Random | None = None,
        fanning: random.Random | None = None,
    ) -> None:
        self.rng = rng
        self.keyed = keyed
        """The keyed edges' own stream (None: this world has none), so that drawing them
        leaves the rest of a graph world's draws as they were."""
        self.fanning = fanning
        """The fan-out parents' own stream (None: this world has none), for the same reason."""
        self.parents: dict[str, FanOut] = {}
        """Fan-out parents by id: their handlers call ``current_job().fan_out``."""
        self.flows: dict[str, Flow] = {}
        """Each fan-out's flow by its continuation's id, from its first call on."""
        self._fanning = False
        """The fan-out operator is yet to enqueue a parent: the run is not quiet."""
        self._fan_out_ids = iter(range(FIRST_FAN_OUT, FIRST_GRAPH_JOB + 2 * 10**8))
        self.waits: dict[str, tuple[str, ...]] = {}
        """Dependent id -> its dependencies, for every graph of the run."""
        self._ids = iter(range(FIRST_GRAPH_JOB, 2 * FIRST_GRAPH_JOB))
        self._writing = False
        self.edges: list[KeyedEdge] = []
        self._keyed_busy: set[Process] = set()
        """Keyed producers inside an enqueue: the run is not quiet while one may still write."""
        self._crashed: set[str] = set()
        """Keyed jobs whose first producer crashed between its two writes."""
        self.bodies: dict[str, Any] = {"repairer": self._repairer, KEYED_PRODUCER: self._keyed}
        """The process kinds this extra adds: the reaper's pass over ``wait/`` (``Repairer``),
        run apart from the world's reapers so that a world without graphs is unchanged, and
        the keyed producers (``World.start`` brings a crashed one back by its kind)."""

    # -- the harness's hooks ----------------------------------------------

    def start(self, world: World) -> None:
        operator = world.scheduler.new_process("graph-operator", "producer")  # never crashes
        world.scheduler.spawn(operator, "graphs", lambda: self._operate(world, operator))
        for _ in range(REPAIRERS):
            world.start("repairer", delay=self.rng.uniform(0, world.config.reaper_period))

    def quiet(self, world: World) -> bool:
        """Not while the operator writes, nor while a dependent whose dependencies all ended
        is yet to end (a late edge waits for a reaper's pass): the reapers run on meanwhile."""
        busy = any(process.alive for process in self._keyed_busy)
        return not self._writing and not self._fanning and not busy and not any(self._due(world))

    def _due(self, world: World) -> list[str]:
        due = []
        for dependent, after in self.waits.items():
            if all(_outcome(world.store, world.keys, job) for job in after) and not _find(
                world.store, world.keys, dependent, "done/"
            ):
                due.append(dependent)
        return due

    def check(self, world: World) -> None:
        """Never waits forever: every dependent whose dependencies all ended has ended too."""
        for dependent, after in self.waits.items():
            outcomes = [_outcome(world.store, world.keys, job) for job in after]
            if any(outcome is None for outcome in outcomes):
                continue  # a dependency still runs (cannot be, once quiet) or was never written
            world.counts["graph_dependents_ended"] += 1
            if _outcome(world.store, world.keys, dependent) is None:
                world.ledger.violate(
                    Kind.DEPENDENCY,
                    dependent,
                    f"waits forever: its dependencies all ended ({outcomes}) and it did not",
                )
            if _find(world.store, world.keys, dependent, WAIT) is not None:
                world.ledger.violate(
                    Kind.DEPENDENCY, dependent, "ended, and its wait/ record is still there"
                )

        for flow in self.flows.values():
            self._check_flow(world, flow)

    def _check_flow(self, world: World, flow: Flow) -> None:
        """No child without its continuation: every attempt of the parent has ended by now."""
        children = [
            child
            for child in flow.children
            if any(_find(world.store, world.keys, child, state) for state in _STATES)
        ]
        if not children:
            return
        world.counts["graph_fan_out_flows"] += 1
        if not any(_find(world.store, world.keys, flow.then, state) for state in _STATES):
            world.ledger.violate(
                Kind.DEPENDENCY,
                flow.then,
                f"fan-out children {children} exist and their continuation has no record",
            )

    def request(self, world: World, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        pass

    def renews_in_handler(self, job_id: str) -> bool:
        return job_id in self.parents

    def handling(self, world: World, job_id: str) -> None:
        """A fan-out parent's handler: ``pail.current_job().fan_out`` for each of its calls.

        Runs on the handler's thread, inside the shipped drain: every request of
        the fan-out is one of the worker's, which the world crashes and stalls.
        An error (a 5xx past the client's tries, a lost lease) fails the attempt.
        """
        fan = self.parents.get(job_id)
        if fan is None:
            return
        job = pail.current_job()
        assert job is not None, "a handler runs with its job's context"
        life = job.message.lease.record.redriven  # a redriven parent fans out a flow of its own
        for number, count in enumerate(fan.calls):
            flow = fan_out_ids(job_id, number, count, life)
            if flow.then not in self.flows:
                for made in (*flow.children, flow.then):
                    world.ledger.expect(made)
                self.flows[flow.then] = flow
                self.waits[flow.then] = (*flow.children, job_id)
            else:
                world.counts["graph_fan_out_repeats"] += 1  # a retry makes the same writes
            world.counts["graph_fan_out_calls"] += 1
            try:
                written = job.fan_out(
                    [{"child": index} for index in range(count)],
                    then={"then": job_id},
                    on_failure=fan.on_failure,
                )
            except BaseException:
                # A crash (``Crash``), a 5xx past the client's tries, a lost lease: half-way.
                world.counts["graph_fan_out_broken"] += 1
                raise
            if written != flow:
                world.ledger.violate(
                    Kind.DEPENDENCY, job_id, f"fan-out {number} wrote {written}, not {flow}"
                )

    def mutated(
        self,
        world: World,
        key: str,
        before: StoredObject | None,
        after: StoredObject | None,
        actor: Actor | None,
    ) -> None:
        if after is None:
            return
        if before is None and self._crashed and world.keys.entry_id(key, WAIT) in self._crashed:
            world.counts["graph_keyed_repaired"] += 1  # its first producer never wrote it
        prefix = QUEUE if world.keys.entry_id(key, QUEUE) is not None else None
        if prefix is None and world.keys.entry_id(key, RUN) is not None:
            prefix = RUN
        if prefix is None:
            return
        job_id = world.keys.job_id(key)
        waits = self.waits.get(job_id)
        if waits is None:
            return
        try:
            body = json.loads(after.body)
        except ValueError:
            return
        if not isinstance(body, dict) or body.get("redriven", 0):
            return  # a redriven dependent runs at once, by the operator's choice
        unmet = [
            job for job in waits if _outcome(world.store, world.keys, job) != OUTCOME_SUCCEEDED
        ]
        if unmet:
            world.ledger.violate(
                Kind.DEPENDENCY,
                job_id,
                f"{key} written while its dependencies {unmet} had not succeeded",
            )
        elif prefix == RUN and before is None:
            world.counts["graph_dependents_claimed"] += 1

    def _repairer(self, world: World, process: Process) -> None:
        repairer = Repairer(world.store, world.keys, stats=world.stats)  # a new process: cold
        while True:
            world.scheduler.sleep(world.config.reaper_period * self.rng.uniform(0.5, 1.5))
            try:
                report = repairer.repair()
            except PailError as exc:
                world.ledger.note(f"wait/ pass failed: {exc}")
                continue
            world.counts["graph_repair_passes"] += 1
            world.counts["graph_repaired"] += report.told

    # -- the operator ------------------------------------------------------

    def _new_id(self, world: World) -> str:
        job_id = sim_job_id(next(self._ids))
        world.ledger.expect(job_id)
        return job_id

    def _operate(self, world: World, process: Process) -> None:
        config = world.config
        keys = world.keys
        clock = world.clock(process)
        if keys.shards > 1:
            # A producer given a count records it in the layout marker before its first write
            # (Pail._write_keys): a finisher still on an older count finds the record by it.
            self._retry(world, lambda: layout_marker.publish(world.store, keys, keys.shards))
        if self.keyed is not None:
            # Its own actor, beside the shapes below: their draws stay what they were.
            keyed = world.scheduler.new_process("keyed-operator", "producer")  # never crashes
            world.scheduler.spawn(keyed, "keyed-graphs", lambda: self._keyed_edges(world, keyed))
        if self.fanning is not None and _fast(world):
            fanning = world.scheduler.new_process("fan-out-operator", "producer")  # never crashes
            world.scheduler.spawn(
                fanning, "fan-outs", lambda: self._fan_out_parents(world, fanning)
            )
        for _ in range(self.rng.randint(2, 4)):
            world.scheduler.sleep(self.rng.uniform(0, config.chaos_duration / 3))
            shape = self.rng.choice(("fan-in", "chain", "late"))
            self._writing = True
            try:
                if shape == "fan-in":
                    self._fan_in(world, keys, clock)
                elif shape == "chain":
                    self._chain(world, keys, clock)
                else:
                    self._late(world, keys, clock)
            finally:
                self._writing = False
            world.counts[f"graphs_{shape}"] += 1
        self._foreign(world, keys)

    def _fan_out_parents(self, world: World, process: Process) -> None:
        """Enqueue the fan-out parents: plain jobs, whose handlers write the graphs."""
        rng = self.fanning
        assert rng is not None
        clock = world.clock(process)
        self._fanning = True
        try:
            self._enqueue_parents(world, rng, clock)
        finally:
            self._fanning = False

    def _enqueue_parents(self, world: World, rng: random.Random, clock: Any) -> None:
        for _ in range(rng.randint(*FAN_OUT_PARENTS)):
            world.scheduler.sleep(rng.uniform(0, world.config.chaos_duration / 3))
            parent = sim_job_id(next(self._fan_out_ids))
            calls = tuple(rng.randint(1, 3) for _ in range(rng.choice((1, 1, 2))))
            on_failure = rng.choice((dependencies.DEAD_LETTER, dependencies.CANCEL))
            self.parents[parent] = FanOut(parent, calls, on_failure)
            world.ledger.expect(parent)
            payload = {"fan-out": len(calls)}
            self._retry(
                world,
                lambda parent=parent, payload=payload: put_pending(
                    world.store, world.keys, payload, parent, now=clock.now()
                ),
            )
            world.counts["graphs_fan-out"] += 1

    def _retry(self, world: World, write: Any) -> None:
        for _ in range(TRIES):
            try:
                write()
                return
            except PailError as exc:  # every write is create-only under a fixed id: send it again
                world.ledger.note(f"graph operator: {exc}; trying again")
                world.scheduler.sleep(self.rng.uniform(0.05, 0.5))
        raise AssertionError("the graph operator could not write its graph")

    def _fan_in(self, world: World, keys: Keys, clock: Any) -> None:
        children = tuple(self._new_id(world) for _ in range(self.rng.randint(1, 4)))
        then = self._new_id(world)
        self.waits[then] = children
        on_failure = self.rng.choice((dependencies.DEAD_LETTER, dependencies.CANCEL))
        flow = dependencies.Flow(children, then)
        payloads = [{"child": n} for n in range(len(children))]
        self._retry(
            world,
            lambda: dependencies.enqueue_flow(
                world.store,
                keys,
                flow,
                payloads,
                {"then": True},
                now=clock.now(),
                on_failure=on_failure,
            ),
        )

    def _chain(self, world: World, keys: Keys, clock: Any) -> None:
        ids = [self._new_id(world) for _ in range(self.rng.randint(2, 3))]
        for before, job in itertools.pairwise(ids):
            self.waits[job] = (before,)
        payloads = [{"link": n} for n in range(len(ids))]
        self._retry(
            world,
            lambda: dependencies.enqueue_chain(world.store, keys, payloads, ids, now=clock.now()),
        )

    def _late(self, world: World, keys: Keys, clock: Any) -> None:
        firsts = tuple(self._new_id(world) for _ in range(self.rng.randint(1, 2)))
        for job in firsts:
            self._retry(
                world, lambda job=job: put_pending(world.store, keys, {}, job, now=clock.now())
            )
        world.scheduler.sleep(self.rng.uniform(0, world.config.visibility_timeout))
        later = self._new_id(world)
        self.waits[later] = firsts
        self._retry(
            world,
            lambda: put_waiting(
                world.store, keys, {"late": True}, later, firsts, now=clock.now(), late=True
            ),
        )

    def _keyed_edges(self, world: World, process: Process) -> None:
        """Keyed late edges: the dependencies, then keyed producers racing their ends."""
        rng = self.keyed
        assert rng is not None
        clock = world.clock(process)
        vt = world.config.visibility_timeout
        for number in range(rng.randint(1, 2)):
            world.scheduler.sleep(rng.uniform(0, world.config.chaos_duration / 3))
            self._writing = True
            try:
                firsts = tuple(self._new_id(world) for _ in range(rng.randint(1, 2)))
                for job in firsts:
                    self._retry(
                        world,
                        lambda job=job: put_pending(
                            world.store, world.keys, {}, job, now=clock.now()
                        ),
                    )
                edge = KeyedEdge(
                    f"keyed-{number}",
                    firsts,
                    self._new_id(world),
                    rng.choice((dependencies.DEAD_LETTER, dependencies.CANCEL)),
                    rng.random() < 0.75,
                )
                self.waits[edge.job_id] = firsts
                self.edges.append(edge)
                for _ in range(rng.randint(2, 3)):  # the first, and its repeats
                    world.start(KEYED_PRODUCER, delay=rng.uniform(0, 1.5 * vt))
            finally:
                self._writing = False
            world.counts["graphs_keyed"] += 1

    def _keyed(self, world: World, process: Process) -> None:
        """A keyed producer: ``enqueue(key=K, after=[...])`` of every keyed edge made so far.

        The first to reach an edge whose ``crash_first`` is set crashes right after its key
        record landed, before the waiting record; the world brings the process back, and it
        repeats every edge. Each try is the whole call again, as a producer's retry is.
        """
        rng = self.keyed
        assert rng is not None
        clock = world.clock(process)
        for edge in list(self.edges):
            store: Store = world.store
            first = edge.crash_first and edge.job_id not in self._crashed
            if first:
                hooked = HookedStore(world.store)
                hooked.before(
                    "put", world.keys.wait(edge.job_id), partial(self._crash, world, edge)
                )
                store = hooked
            self._keyed_busy.add(process)
            try:
                for _ in range(TRIES):
                    try:
                        made = dedup.enqueue_keyed(
                            store,
                            world.keys,
                            {"keyed": edge.key},
                            edge.key,
                            now=clock.now(),
                            after=edge.after,
                            on_failure=edge.on_failure,
                            job_id=edge.job_id,
                        )
                        break
                    except PailError as exc:  # S3 refused: a producer sends the call again
                        world.ledger.note(f"keyed producer: {exc}; trying again")
                        world.scheduler.sleep(rng.uniform(0.05, 0.5))
                else:
                    raise AssertionError("a keyed producer could not enqueue its edge")
            finally:
                self._keyed_busy.discard(process)
            if made.id != edge.job_id:
                world.ledger.violate(
                    Kind.DEPENDENCY, edge.job_id, f"key {edge.key} named {made.id}, a second job"
                )
            world.counts["graph_keyed_enqueues"] += 1
            world.counts["graph_keyed_repeats"] += not made.created

    def _crash(self, world: World, edge: KeyedEdge) -> None:
        """The keyed producer dies between its key record and its waiting record."""
        if edge.job_id in self._crashed:
            return  # a repeat: it does not crash
        actor = world.scheduler.current
        assert actor is not None
        self._crashed.add(edge.job_id)
        self._keyed_busy.discard(actor.process)
        world.counts["graph_keyed_crashed"] += 1
        world.ledger.note(f"keyed producer crashes before wait/{edge.job_id}")
        rng = self.keyed
        assert rng is not None
        world.start(KEYED_PRODUCER, delay=rng.uniform(0.05, world.config.visibility_timeout))
        world.scheduler.crash(actor.process)

    def _foreign(self, world: World, keys: Keys) -> None:
        key = keys.wait(sim_job_id(3 * FIRST_GRAPH_JOB))
        garbage = self.rng.choice((b"NaN", b'{"payload": 1, "after": "x"}', b"\xff\xfe", b"[]"))
        self._retry(world, lambda: world.store.put(key, garbage))
        world.counts["graph_foreign"] += 1


def _fast(world: World) -> bool:
    """Whether the world runs more than one job at a time: fan-outs join it only then.

    A world of one worker, or with concurrency limits, works through its jobs
    one (or a few) at a time; a fan-out's three to ten more jobs pushed such
    runs past their time limit with their graphs half done (main-sweep seeds
    4457 and 5568), which is no fault of the protocol.
    """
    limited = any(getattr(extra, "has_limits", False) for extra in world.extras)
    return world.config.workers > 1 and not limited


_STATES = (WAIT, QUEUE, RUN, DONE)
"""Where a graph job has a record, from its waiting one to its outcome."""


def _find(store: Store, keys: Keys, job_id: str, state: str) -> StoredObject | None:
    for layout in dependencies.unpinned(keys).layouts(job_id):
        found = store.peek(f"{layout.job_prefix(state, job_id)}{job_id}")  # type: ignore[attr-defined]
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


def _outcome(store: Store, keys: Keys, job_id: str) -> str | None:
    done = _find(store, keys, job_id, "done/")
    if done is None:
        return None
    return done.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)


def graphs_for(seed: int, share: float | None = None) -> Graphs | None:
    """The graphs of seed ``seed``'s world, or None (most seeds), drawn apart from the run's randomness."""
    rng = random.Random(f"dependency-graphs-{seed}")  # a salt none of the pinned seeds draws
    if rng.random() >= (SHARE if share is None else share):
        return None
    keyed = random.Random(f"keyed-after-{seed}")  # its own stream: a graph world's draws stay
    fanning = random.Random(f"fan-out-{seed}")  # and the fan-outs'
    return Graphs(
        rng,
        keyed if keyed.random() < KEYED_SHARE else None,
        fanning if fanning.random() < FAN_OUT_SHARE else None,
    )
