"""Schedules in the main sweep (``ticking.py``): the worlds that tick, and the known-bad ticks they catch.

The main sweep (``test_simulation``) runs these worlds among its 10,000 seeds
and asserts that ticks happened; here, the share is pinned, and a tick
enqueued without its dedup, or recorded without its job, must break
``Kind.TICK`` within the first ticking seeds: an invariant that cannot fail
proves nothing.
"""

from __future__ import annotations

import pytest

from pail.protocol.schedules import runner
from tests.simulation import test_schedules_sim
from tests.simulation.harness import run_seed
from tests.simulation.invariants import Kind
from tests.simulation.ticking import ticking_for

SEARCH = 400
"""Seeds whose ticking worlds the known-bad variants must be caught in (about 20 of them tick)."""


def _ticking(seeds: range) -> list[int]:
    return [seed for seed in seeds if ticking_for(seed) is not None]


def test_given_the_main_sweep_seeds_then_about_one_in_twenty_ticks_and_its_ticks_run() -> None:
    ticking = _ticking(range(2000))
    outcomes = [run_seed(seed) for seed in ticking[:5]]

    assert 60 <= len(ticking) <= 140, len(ticking)
    assert not [o.report() for o in outcomes if o.failed]
    assert sum(o.counts["tick_jobs"] for o in outcomes) >= 5
    assert all(o.counts["tick_passes"] > 0 for o in outcomes)
    # The tick jobs are the run's jobs: done by its workers, followed by its ledger.
    assert all(
        o.counts["jobs_done"] + o.counts["jobs_dead"] >= o.counts["tick_jobs"] for o in outcomes
    )


def _first_caught(seeds: list[int]) -> int | None:
    return next((seed for seed in seeds if Kind.TICK in run_seed(seed).kinds()), None)


def test_given_a_tick_without_its_dedup_in_the_main_sweep_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "enqueue_tick", test_schedules_sim._without_dedup)

    caught = _first_caught(_ticking(range(SEARCH)))

    assert caught is not None, f"no ticking world of the first {SEARCH} seeds caught a duplicate"
    print(f"\na tick without its dedup: caught at seed {caught}")


def test_given_a_tick_recorded_without_its_job_in_the_main_sweep_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "enqueue_tick", test_schedules_sim._forgets_the_job)

    caught = _first_caught(_ticking(range(SEARCH)))

    assert caught is not None, f"no ticking world of the first {SEARCH} seeds caught a missed tick"
    print(f"\na tick recorded without its job: caught at seed {caught}")
