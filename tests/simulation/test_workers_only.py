"""Workers and nothing else: no reaper actor at all, as a pailq 0.1.1 deployment runs.

Each worker is ``Pail.work`` (the shipped drain, ``worker.py``) with its
claims' own reclaim pass (``pail.protocol.reclaim``): before a claim, at most once per visibility
timeout, the real ``Reclaimer`` runs the real ``Reaper.reclaim_leases`` on the
worker's own clock, in the worker's own process, so a crash or a stall can
hit it half-way like any other step. The run is the harness's (``World``,
its chaos, its ledger and its end-of-run checks: every job terminal exactly
once, nothing stuck in ``queue/`` or ``run/``), with ``reapers=0``; crashed
workers are restarted by the harness as in every family.

``PAIL_SIM_WORKERS_ONLY_SEEDS`` fixed seeds (300 by default) and
``PAIL_SIM_WORKERS_ONLY_NEW_SEEDS`` of the day's (200; ``seeds.FamilySeeds``) on
``PAIL_SIM_PROCESSES`` processes. A known-bad variant (workers that never
reclaim) must leave a job stuck, so the family can fail.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from pail.protocol.reaper import Reaper
from pail.protocol.reclaim import Reclaimer
from tests.simulation import actors, worker
from tests.simulation.harness import PAIL, Model, Outcome, SimConfig, World
from tests.simulation.invariants import Kind
from tests.simulation.scheduler import Process
from tests.simulation.seeds import FamilySeeds
from tests.simulation.sweep import chunks

SEEDS = FamilySeeds.of("WORKERS_ONLY", fixed=300, fresh=200)
PROCESSES = int(os.environ.get("PAIL_SIM_PROCESSES", "2"))
CHUNK = 50
KNOWN_BAD_SEEDS = 200
"""Seeds tried for the known-bad variant: the first with a crash mid-job must be caught."""


def _worker(*, reclaims: bool) -> Callable[[World, Process], None]:
    def body(world: World, process: Process) -> None:
        """``Pail.work`` with ``reclaim`` on: ``Pail._claim``'s throttled pass before each claim."""
        config = world.config
        clock = world.clock(process)
        reaper = Reaper(
            world.store,
            world.keys,
            world.policy,
            stats=world.stats,
            page_size=config.reaper_page_size,
            max_pages=config.reaper_max_pages,
        )
        reclaimer = Reclaimer(
            reaper.reclaim_leases,
            interval=config.visibility_timeout,
            monotonic=clock.monotonic,
            now=clock.now,
        )

        def before_claim() -> None:
            # ``Pail._before_claim``: one clock read, a pass once per interval (its own phase).
            if reclaims and reclaimer.due():
                with world.phase("reap"):
                    if reclaimer.before_claim() is not None:  # a failed pass is None, logged
                        world.counts["worker_reclaim_passes"] += 1

        worker.run_worker(world, process, before_claim=before_claim)

    return body


WORKERS_ONLY = Model(
    "pail-workers-only", PAIL.rules, actors.producer, _worker(reclaims=True), actors.reaper
)
NEVER_RECLAIMING = Model(
    "known-bad-never-reclaiming",
    PAIL.rules,
    actors.producer,
    _worker(reclaims=False),
    actors.reaper,
)


def run_workers_only(seed: int, *, model: Model = WORKERS_ONLY) -> Outcome:
    """The run of ``seed`` with its workers and no reaper actor (``reapers=0``)."""
    config = replace(SimConfig.for_seed(seed), reapers=0)
    return World(config, model).run()


def _chunk(seeds: range) -> tuple[int, list[int], list[str], int]:
    failed: list[int] = []
    reports: list[str] = []
    passes = 0
    for seed in seeds:
        outcome = run_workers_only(seed)
        passes += outcome.counts["worker_reclaim_passes"]
        if outcome.failed:
            failed.append(seed)
            reports.append(outcome.report())
    return len(seeds), failed, reports, passes


def test_given_workers_only_and_no_reaper_when_simulated_then_no_job_is_stuck_or_lost() -> None:
    context = multiprocessing.get_context("spawn")  # the caller (pytest) may have threads
    with ProcessPoolExecutor(PROCESSES, mp_context=context) as pool:
        results = list(pool.map(_chunk, chunks(SEEDS.ranges, CHUNK)))
    seeds = sum(r[0] for r in results)
    failed = sorted(seed for r in results for seed in r[1])
    reports = [report for r in results for report in r[2]]
    passes = sum(r[3] for r in results)

    print(f"\nworkers only ({SEEDS}): {passes} reclaim passes")
    assert seeds == len(SEEDS)
    assert not failed, f"seeds {failed[:20]} failed:\n\n" + "\n\n".join(reports[:3])
    assert passes > 0  # the workers did reclaim (nothing else could)


def test_given_workers_that_never_reclaim_when_a_worker_crashes_then_a_job_is_caught_stuck() -> (
    None
):
    caught = None
    for seed in range(KNOWN_BAD_SEEDS):
        outcome = run_workers_only(seed, model=NEVER_RECLAIMING)
        if outcome.failed:
            caught = outcome
            break
    assert caught is not None, f"no seed of {KNOWN_BAD_SEEDS} caught workers that never reclaim"
    assert Kind.STUCK in caught.kinds(), caught.report()
