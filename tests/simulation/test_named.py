"""The simulation with event-woken workers only, as the worker Lambda runs (``tests/simulation/named.py``).

The sweep shows that with no listing worker at all, the jobs still end
exactly once across crashes, stalls, faults, lost and repeated events and
pauses (the events, the schedule and the reaper being the only ways a job
is found), that an invocation whose named job was gone sends nothing but
its GET, and that a named claim honours the pause. The known-bad variants
(a drain that lists after it won nothing, as before the named claim; a
claim that never looks at the pause marker) show both checks can fail.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from pail.aws.named import Claims, NamedFirst
from pail.protocol.pause import PauseCheck
from tests.simulation.invariants import Kind
from tests.simulation.named import run_named_seed

SEEDS = int(os.environ.get("PAIL_SIM_NAMED_SEEDS", "200"))
KNOWN_BAD_BUDGET = 40


def test_given_event_woken_workers_only_when_simulated_then_every_invariant_holds() -> None:
    counts: Counter[str] = Counter()
    failures = []
    for seed in range(SEEDS):
        outcome = run_named_seed(seed, pausing=seed % 2 == 1, sharded=seed % 3 == 0)
        counts += outcome.counts
        if outcome.failed:
            failures.append(outcome.report())

    print(
        f"named: {SEEDS} seeds, {counts['named_invocations']} invocations of "
        f"{counts['named_events']} events ({counts['named_events_lost']} lost); named claims "
        f"{counts['named_claimed']} won, {counts['named_gone']} gone, {counts['named_taken']} "
        f"taken, {counts['named_paused']} paused; {counts['crashes']} crashes, "
        f"{counts['jobs_done']} jobs done, {counts['jobs_dead']} dead-lettered"
    )
    assert not failures, "\n\n".join(failures[:3])
    assert counts["named_claimed"] and counts["named_gone"] and counts["named_taken"]
    assert counts["named_paused"] and counts["crashes"] and counts["named_events_lost"]


def test_given_a_drain_that_lists_after_winning_nothing_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = NamedFirst.__init__

    def always_lists(self: NamedFirst[object], pail: Claims[object], keys: object) -> None:
        real(self, pail, keys)  # type: ignore[arg-type]
        self._list = True  # as before the named claim: every wake-up lists

    monkeypatch.setattr(NamedFirst, "__init__", always_lists)

    caught = next(
        (s for s in range(KNOWN_BAD_BUDGET) if Kind.NAMED_WAKE in run_named_seed(s).kinds()),
        None,
    )

    assert caught is not None, "no seed caught a woken drain that lists after losing its job"


def test_given_a_named_claim_that_ignores_the_pause_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(PauseCheck, "__call__", lambda self: False)

    caught = next(
        (
            s
            for s in range(KNOWN_BAD_BUDGET)
            if Kind.PAUSE in run_named_seed(s, pausing=True).kinds()
        ),
        None,
    )

    assert caught is not None, "no seed caught a named claim that never looks at the pause"
