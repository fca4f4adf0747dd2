"""The simulation with foreign writers: hostile objects in every prefix, and pailq 0.1.1's producer.

``tests/simulation/hostile.py`` has the actors and their invariants. The
sweep shows they hold under the full fault model (crashes, stalls, faults,
late heartbeats) with the ledger's invariants for every real job; the two
known-bad variants show the checks can fail: a claimer that passes foreign
entries by instead of quarantining them, and a reaper that stops at a
foreign lease (the hostile review's defects 1 and 2).
"""

from __future__ import annotations

import os

import pytest

from pail.errors import DecodeError
from pail.keys import Keys
from pail.protocol.claim import MISS
from pail.protocol.reaper import Reaper, ReapReport
from pail.store.base import ObjectInfo
from tests.simulation import steps
from tests.simulation.harness import run_seed
from tests.simulation.hostile import extras_for
from tests.simulation.invariants import Kind
from tests.simulation.seeds import FamilySeeds
from tests.simulation.sweep import SWEEP_TIMEOUT, sweep

SEEDS = FamilySeeds.of("HOSTILE", fixed=200, fresh=100)
PROCESSES = int(os.environ.get("PAIL_SIM_PROCESSES", "2"))
KNOWN_BAD_BUDGET = 60


@pytest.mark.timeout(SWEEP_TIMEOUT)
def test_given_foreign_writers_when_simulated_then_every_invariant_holds() -> None:
    result = sweep(SEEDS.ranges, processes=PROCESSES, hostile=True)

    print(f"hostile ({SEEDS}): {result.summary()}")
    assert result.seeds == len(SEEDS)
    assert not result.failed_seeds, "\n\n".join(result.failures[:3])
    counts = result.counts
    print(
        f"foreign: {counts['foreign_quarantined']} entries quarantined, "
        f"{counts['foreign_leases']} leases reaped, {counts['foreign_untouched']} left alone, "
        f"{counts['pailq_jobs']} pailq jobs ({counts['pailq_nan_jobs']} with NaN), "
        f"{counts['operator_reads']} operator reads"
    )
    assert counts["foreign_quarantined"] > 0 and counts["foreign_leases"] > 0
    assert counts["pailq_nan_jobs"] > 0 and counts["operator_reads"] > 0


def _first_caught() -> int | None:
    """The first seed (with foreign writers) whose run reports a foreign-bytes violation."""
    hostile = (seed for seed in range(KNOWN_BAD_BUDGET) if extras_for(seed))
    return next((s for s in hostile if Kind.FOREIGN in run_seed(s, hostile=True).kinds()), None)


def test_given_a_claimer_that_passes_foreign_entries_by_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps.CLAIM_QUARANTINE.replace(monkeypatch, lambda self, job_id, pending, exc: MISS)

    assert _first_caught() is not None, "no seed caught a claimer that never quarantines"


def test_given_a_reaper_that_stops_at_a_foreign_lease_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reclaim = steps.REAPER_RECLAIM.current

    def stops(
        self: Reaper, item: ObjectInfo, job_id: str, report: ReapReport, age: float, keys: Keys
    ) -> None:
        if job_id.startswith("-h"):  # a foreign lease: raise, as the reaper did before the fix
            raise DecodeError(f"{item.key}: the defect-2 reaper stops here")
        reclaim(self, item, job_id, report, age, keys)

    steps.REAPER_RECLAIM.replace(monkeypatch, stops)

    assert _first_caught() is not None, "no seed caught a reaper that stops at a foreign lease"
