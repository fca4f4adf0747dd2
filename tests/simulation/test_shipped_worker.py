"""The worker loop as shipped under the simulation: ``pail.drain``, ``Message`` and ``Heartbeat``.

The ``shipped`` model (``actors.shipped_worker``) runs ``pail.drain.drain``
and ``supervise`` (the handler on a thread of its own), ``Message``'s
``complete``, ``fail`` and ``release`` (``settle.release``, with the reaper's
rules for a released lease) and the ``Heartbeat``, their threads and events
simulated through ``pail.threads`` (``sim_threads.py``), under the full
fault model, with stop requests that make the drain release jobs (a SIGTERM
mid-handler: the attempt spent) or return them (claimed past the deadline:
the attempt kept). Every invariant of the main sweep is checked.
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.harness import SHIPPED, run_seed
from tests.simulation.invariants import Kind
from tests.simulation.regressions import REGRESSIONS
from tests.simulation.sweep import sweep

SEEDS = int(os.environ.get("PAIL_SIM_SHIPPED_SEEDS", "1000"))
PROCESSES = int(os.environ.get("PAIL_SIM_PROCESSES", "2"))
KNOWN_BAD_BUDGET = 100


def test_given_the_shipped_worker_loop_when_simulated_then_every_invariant_holds() -> None:
    result = sweep(range(SEEDS), model=SHIPPED.name, processes=PROCESSES)

    print(f"\nshipped worker loop: {result.summary()}")
    counts = result.counts
    print(
        f"  drain: {counts['drain_succeeded']} succeeded, {counts['drain_failed']} failed, "
        f"{counts['drain_released']} released (SIGTERM mid-handler), {counts['drain_returned']} "
        f"returned unstarted, {counts['drain_unrecorded']} unrecorded; "
        f"{counts['drain_returns']} drains ended"
    )
    assert result.seeds == SEEDS
    assert not result.failed_seeds, "\n\n".join(
        [f"failed seeds: {result.failed_seeds[:50]}", *result.failures[:3]]
    )
    assert counts["drain_released"] > 0 and counts["drain_returned"] > 0
    assert counts["drain_succeeded"] > 0 and counts["drain_failed"] > 0
    assert counts["crashes"] > 0 and counts["heartbeat_delays"] > 0


def test_given_the_old_claim_step_three_under_the_shipped_loop_then_a_parallel_run_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped loop is no blind spot: the known-bad claim step 3 is caught through it too."""
    regression = next(r for r in REGRESSIONS if r.name == "stalled-claimer-runs-in-parallel")
    regression.restore_bug(monkeypatch)

    found = next(
        (s for s in range(KNOWN_BAD_BUDGET) if Kind.PARALLEL in run_seed(s, SHIPPED).kinds()),
        None,
    )

    assert found is not None, f"no parallel execution in {KNOWN_BAD_BUDGET} shipped-loop seeds"
