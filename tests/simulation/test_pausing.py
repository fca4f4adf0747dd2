"""The simulation with an operator who pauses and resumes the queue (``tests/simulation/pausing.py``).

The sweep shows that no worker claims after one of its own refills saw the
pause, and that every job still ends exactly once across pauses and resumes
with crashes, stalls and faults. The known-bad variant (a claimer that never
looks at the marker) shows the check can fail.
"""

from __future__ import annotations

import os

import pytest

from pail.protocol.pause import PauseCheck
from tests.simulation.harness import run_seed
from tests.simulation.invariants import Kind
from tests.simulation.regressions import REGRESSIONS
from tests.simulation.seeds import FamilySeeds
from tests.simulation.sweep import SWEEP_TIMEOUT, sweep

SEEDS = FamilySeeds.of("PAUSE", fixed=300, fresh=200)
PROCESSES = int(os.environ.get("PAIL_SIM_PROCESSES", "2"))
KNOWN_BAD_BUDGET = 60


@pytest.mark.timeout(SWEEP_TIMEOUT)
def test_given_an_operator_pausing_and_resuming_when_simulated_then_every_invariant_holds() -> None:
    result = sweep(SEEDS.ranges, processes=PROCESSES, pausing=True)

    print(f"pausing ({SEEDS}): {result.summary()}")
    counts = result.counts
    print(f"pausing: {counts['pauses']} pauses, {counts['pause_refills']} refills saw one")
    assert result.seeds == len(SEEDS)
    assert not result.failed_seeds, "\n\n".join(result.failures[:3])
    assert counts["pauses"] > 0 and counts["pause_refills"] > 0


def test_given_the_seed_that_walked_an_unchecked_page_when_replayed_then_only_the_old_refill_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pause check that failed (its HEAD, a 5xx past the tries) once left the listed page in
    the claimer's cache, and its next claim walked it unchecked: claimed while paused."""
    regression = next(r for r in REGRESSIONS if r.name == "pause-check-failure-walks-its-page")
    assert regression.seed is not None  # pinned by a seed, not by a schedule
    fixed = run_seed(regression.seed, pausing=True)
    assert not fixed.failed, fixed.report()

    regression.restore_bug(monkeypatch)
    old = run_seed(regression.seed, pausing=True)

    assert Kind.PAUSE in old.kinds(), old.report()
    assert "after a refill that saw the pause" in next(
        v.detail for v in old.violations if v.kind is Kind.PAUSE
    )


def test_given_a_claimer_that_ignores_the_pause_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(PauseCheck, "__call__", lambda self: False)

    caught = next(
        (
            seed
            for seed in range(KNOWN_BAD_BUDGET)
            if Kind.PAUSE in run_seed(seed, pausing=True).kinds()
        ),
        None,
    )

    assert caught is not None, "no seed caught a claimer that never looks at the pause marker"
