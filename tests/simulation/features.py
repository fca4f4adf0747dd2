"""The simulation, extended to the features beyond the original: dedup keys and cancellation.

The workers and reapers are the harness's own (the real ``Claimer``,
``settle`` and ``Reaper``); the producer is a user's that uses the features:

* every job is enqueued with a **dedup key** (``Pail.enqueue_once``); a
  storage error is retried with the *same* key, as a user of keys would,
  and every key is enqueued a second time once the first call returned;
* some jobs are **delayed** (``delay=`` counted from the producer's skewed
  wall clock), so claims promote them;
* some are **high priority** (a delayed entry due at the epoch);
* every lease renewal carries **progress** (as a handler's
  ``message.progress`` would), which only renewals may write;
* half the runs retry failed attempts with a **backoff** (``RetryPolicy``),
  held in the lease until the reaper requeues the job;
* some jobs are **cancelled**, at a random time (pending, running or done),
  retried on storage errors as ``cancel`` is idempotent.

``FeatureLedger`` checks, on top of every invariant of ``invariants.py``:

* **one job per key:** the entries of one key's payload all carry one job id,
  and a repeat returns that id;
* **a delayed job never starts before its due time** (by the server's clock);
* **progress** is written by renewals only.

(The cancellation invariants, that a job whose cancellation passed its commit
point never starts again and that a ``cancel`` that returned True ends the
job cancelled, are ``invariants.py``'s: the main sweep cancels jobs too.)
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from pail import queue as pail_queue
from pail.errors import JobNotFoundError, PailError, StorageError
from pail.keys import Keys
from pail.protocol import dedup, delay
from pail.protocol.lease import Lease
from pail.protocol.retry import RetryPolicy
from pail.protocol.settle import Policy
from pail.queue import Pail
from pail.store.base import StoredObject
from tests.simulation import actors, worker
from tests.simulation.harness import Model, SimConfig, World
from tests.simulation.invariants import QUEUE, RUN, Execution, Kind, Ledger, Rules
from tests.simulation.scheduler import Actor, Process
from tests.simulation.sim_store import EPOCH

if TYPE_CHECKING:
    from tests.simulation.harness import Outcome

DELAYED = "delayed"
"""The ledger's name for the prefix of delayed entries."""
CANCEL_SHARE = 0.4
"""Of the jobs, the share the producer cancels."""
DELAY_SHARE = 0.4
"""Of the jobs, the share enqueued with a delay."""
HIGH_SHARE = 0.3
"""Of the other jobs, the share enqueued with high priority (promoted like a due delayed job)."""


class FeatureLedger(Ledger):
    """``Ledger`` plus the dedup and cancellation invariants (module docstring)."""

    def __init__(self, world: World) -> None:
        config = world.config
        super().__init__(
            world.scheduler,
            visibility_timeout=config.visibility_timeout,
            max_retries=config.max_retries,
            rules=Rules.PAIL,
        )
        self.due_at: dict[str, float] = {}
        self.ids_by_key: defaultdict[int, set[str]] = defaultdict(set)
        self.returned_by_key: defaultdict[int, set[str]] = defaultdict(set)

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        parsed = delay.parse(Keys(), key)
        if parsed is not None:
            if after is not None:
                self.due_at.setdefault(parsed[1], parsed[0] / 1000 - EPOCH.timestamp())
            self._delayed(parsed[1], before, after)
            return
        prefix, _, job_id = key.partition("/")
        job = self.jobs.get(job_id)
        super().mutated(key, before, after, actor)
        if job is None or after is None:
            return
        if prefix == RUN and before is None and "progress" in _json(after.body):
            self._violate(Kind.TERMINAL, job_id, "a new lease carries progress: not a renewal")
        if prefix == QUEUE:
            data = _json(after.body)
            payload = data.get("payload")
            if isinstance(payload, dict) and "n" in payload:
                self.ids_by_key[int(payload["n"])].add(job_id)
                if len(self.ids_by_key[int(payload["n"])]) > 1:
                    self._violate(
                        Kind.TERMINAL,
                        job_id,
                        f"dedup key {payload['n']} has jobs {sorted(self.ids_by_key[payload['n']])}",
                    )

    def _delayed(
        self, job_id: str, before: StoredObject | None, after: StoredObject | None
    ) -> None:
        """A delayed entry (``queue/!{due}-{id}``): the job exists, under a prefix of its own."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        if after is not None and not job.enqueued:
            job.enqueued = True
            self.enqueued += 1
        super().mutated(f"{DELAYED}/{job_id}", before, after, None)
        if after is not None and _json(after.body).get("cancelled"):
            self.cancelled(job_id)

    def execution_started(
        self, process: Process, job_id: str, attempt: int, claim_started: float
    ) -> Execution:
        execution = super().execution_started(process, job_id, attempt, claim_started)
        due = self.due_at.get(job_id)
        if due is not None and self._scheduler.now < due:
            self._violate(
                Kind.RAN_AFTER_END,  # the nearest kind: ran outside its allowed time
                job_id,
                f"{execution.label()} started before its due time t={due:.3f}",
            )
        return execution

    def returned(self, index: int, job_id: str) -> None:
        """A keyed enqueue of payload ``index`` returned ``job_id``."""
        self.returned_by_key[index].add(job_id)
        if len(self.returned_by_key[index]) > 1:
            self._violate(
                Kind.TERMINAL,
                job_id,
                f"dedup key {index} returned {sorted(self.returned_by_key[index])}",
            )


def _json(body: bytes) -> dict[str, object]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def producer(world: World, process: Process) -> None:
    """Keyed enqueues (each key twice), and cancellations of some jobs at random times."""
    config = world.config
    ledger = world.ledger
    assert isinstance(ledger, FeatureLedger)
    # Delays count from the producer's wall clock (skewed: its clock's now), due by the server's.
    pail = Pail(
        world.store,
        visibility_timeout=config.visibility_timeout,
        max_retries=config.max_retries,
        clock=world.clock(process),
    )
    to_cancel: list[str] = []
    for index in range(config.jobs):
        world.scheduler.sleep(world.rng.uniform(0, config.enqueue_window))
        delayed = world.rng.random() < DELAY_SHARE
        seconds = world.rng.uniform(0.5, 2 * config.visibility_timeout) if delayed else 0.0
        urgent = not delayed and world.rng.random() < HIGH_SHARE
        priority = "high" if urgent else "normal"
        world.counts["delayed"] += delayed
        world.counts["high_priority"] += urgent
        for _repeat in range(2):
            job_id = _retrying(world, partial(_enqueue, pail, index, seconds, priority))
            ledger.returned(index, job_id)
        roll = world.rng.random()
        if roll < CANCEL_SHARE / 2:
            _cancel_now(world, pail, job_id)  # most likely still pending
        elif roll < CANCEL_SHARE:
            to_cancel.append(job_id)
    world.producer_done = True
    for job_id in to_cancel:
        world.scheduler.sleep(world.rng.uniform(0, config.visibility_timeout))
        _cancel_now(world, pail, job_id)


def _cancel_now(world: World, pail: Pail, job_id: str) -> None:
    outcome = _retrying(world, partial(_cancel, pail, job_id))
    world.counts[f"cancel_{outcome}"] += 1
    world.counts["cancels"] += 1


def _enqueue(pail: Pail, index: int, delay_seconds: float, priority: str) -> str:
    delay = delay_seconds or None
    return pail.enqueue_once({"n": index}, key=f"k{index}", delay=delay, priority=priority).id


def _cancel(pail: Pail, job_id: str) -> str:
    try:
        return "cancelled" if pail.cancel(job_id) else "ended"
    except JobNotFoundError:
        return "not-found"  # between two states four times in a row: harmless, counted
    except StorageError:
        raise  # retried by the caller
    except PailError:
        return "stopped"  # a call that died half-way (a test stops some after their commit)


def _retrying(world: World, call: Callable[[], str]) -> str:
    while True:
        try:
            return call()
        except StorageError as exc:
            world.counts["producer_errors"] += 1
            world.ledger.note(f"producer call failed, again: {exc}")
            world.scheduler.sleep(world.rng.uniform(0.05, 0.5))


FEATURES = Model("features", Rules.PAIL, producer, worker.worker, actors.reaper)


def run_feature_seed(seed: int, *, chaos: bool = True, config: SimConfig | None = None) -> Outcome:
    """One run of the features model; the same seed replays the same run.

    ``config`` replaces the seed's drawn shape (``coverage.py`` aims its faults so).
    """
    if config is None:
        config = SimConfig.for_seed(seed, chaos=chaos)
    world = World(config, FEATURES)
    world.replay_flags = " --features" + ("" if chaos else " --calm")
    world.ledger = FeatureLedger(world)
    if seed % 2:  # half the runs retry with a backoff, which the reaper finishes
        vt = config.visibility_timeout
        backoff = RetryPolicy.exponential(vt / 2, max_delay=2 * vt, jitter=0.5)
        world.policy = Policy(config.max_retries, vt, backoff)
    real_renew = Lease.renew

    def renew_with_progress(lease: Lease, **changes: Any) -> None:
        # A handler reporting progress: every renewal carries a new value.
        lease.set_progress({"beat": world.counts["progress"]})
        world.counts["progress"] += 1
        real_renew(lease, **changes)

    # Keyed enqueues draw ids where ``Pail.enqueue`` does, which the harness makes replayable.
    real_dedup_id = getattr(dedup, "new_job_id")  # noqa: B009 - not re-exported
    setattr(dedup, "new_job_id", lambda: getattr(pail_queue, "new_job_id")())  # noqa: B009, B010
    setattr(Lease, "renew", renew_with_progress)  # noqa: B010
    try:
        return world.run()
    finally:
        setattr(Lease, "renew", real_renew)  # noqa: B010
        setattr(dedup, "new_job_id", real_dedup_id)  # noqa: B010
