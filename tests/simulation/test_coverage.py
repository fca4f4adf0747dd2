"""Fault coverage on what struck: every (phase, request, action) triple strikes in CI.

``coverage.py`` explains the aimed family. The main sweep's own strikes are
printed by its test (``test_simulation.py``); this one asserts the whole set.
"""

from __future__ import annotations

import pytest

from tests.simulation.coverage import SEARCH, first_strike
from tests.simulation.harness import AIM_MAX_REQUEST, PHASES, AimAction, triples
from tests.simulation.sweep import SWEEP_TIMEOUT


@pytest.mark.timeout(SWEEP_TIMEOUT)
def test_given_every_phase_request_and_action_when_aimed_then_each_one_struck() -> None:
    wanted = sorted(triples())
    never, failures, runs = [], [], 0
    for triple in wanted:
        seed, failed = first_strike(triple)
        failures += [f"aimed at {triple}:\n{outcome.report()}" for outcome in failed]
        if seed is None:
            never.append(triple)
        runs += SEARCH if seed is None else seed + 1

    print(
        f"\naimed family: struck {len(wanted) - len(never)} of {len(wanted)} "
        f"(phase, request, action) triples in {runs} runs"
    )
    assert len(wanted) == len(PHASES) * AIM_MAX_REQUEST * len(AimAction)
    assert not failures, "\n\n".join(failures[:2])
    assert not never, f"never struck in {SEARCH} seeds each: {never}"
