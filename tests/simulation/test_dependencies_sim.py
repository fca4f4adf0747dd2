"""The dependency graphs' family (``dependencies.py``): every world has fan-ins, chains and late edges.

The shipped workers, reapers, redrivers and cancellers run on them with
crashes and stalls at every request, skewed clocks, the bucket's faults and
foreign bytes under ``wait/``. The invariants of ``docs/dependencies.md`` are
checked at every step (never before its dependencies) and once the run is
quiet (never waits forever). The known-bad variants must break them within
a bounded number of seeds: a family whose invariant cannot fail proves nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pail.protocol import writes
from pail.protocol.dependencies import WaitingJob, release
from tests.simulation import dependencies
from tests.simulation.harness import Outcome, run_seed
from tests.simulation.invariants import Kind
from tests.simulation.regressions import REGRESSIONS

SEEDS = range(120)
"""The CI sweep of the family (about 4 s of CPU on one core)."""
BAD_SEARCH = range(100)
"""The seeds each known-bad variant must break the invariant within (found: seeds 0, 48, 6, 24)."""


@pytest.fixture(autouse=True)
def _every_world_has_graphs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(dependencies, "SHARE", 1.0)
    monkeypatch.setattr(dependencies, "FAN_OUT_SHARE", 1.0)  # and fan-outs, where they fit
    logger = logging.getLogger("pail")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # foreign wait/ records and lost races are logged: expected
    yield
    logger.setLevel(level)


def _describe(outcome: Outcome) -> str:
    return "\n".join(
        [f"seed {outcome.seed}: {v.kind.value} {v.job_id}: {v.detail}" for v in outcome.violations]
        + outcome.trace[-40:]
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_given_dependency_graphs_under_chaos_when_simulated_then_every_invariant_holds(
    seed: int,
) -> None:
    outcome = run_seed(seed)

    assert not outcome.violations, _describe(outcome)


def test_given_the_family_when_simulated_then_its_graphs_run_and_end() -> None:
    counts: Counter[str] = Counter()
    for seed in range(20):
        counts.update(run_seed(seed).counts)

    # The sweep means something only if dependents are claimed, end, and the bucket fights back.
    assert counts["graph_dependents_claimed"] >= 40
    assert counts["graph_dependents_ended"] >= 40
    for shape in ("fan-in", "chain", "late", "keyed", "fan-out"):
        assert counts[f"graphs_{shape}"] >= 3
    assert counts["graph_foreign"] >= 10
    # Fan-outs from handlers: calls broken half-way (crashes, 5xx, lost leases), then repeated.
    assert counts["graphs_fan-out"] >= 20
    assert counts["graph_fan_out_flows"] >= 20
    assert counts["graph_fan_out_broken"] >= 2
    assert counts["graph_fan_out_repeats"] >= 3
    # Keyed late edges: first producers crash between their two writes, and repeats repair.
    assert counts["graph_keyed_crashed"] >= 3
    assert counts["graph_keyed_repaired"] >= 3
    assert counts["graph_keyed_repeats"] >= 10


def _first_caught(kind: Kind = Kind.DEPENDENCY) -> int | None:
    for seed in BAD_SEARCH:
        if any(v.kind is kind for v in run_seed(seed).violations):
            return seed
    return None


def test_given_a_promotion_before_the_last_dependency_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Known-bad: ready once any dependency is met, not all of them.
    monkeypatch.setattr(WaitingJob, "ready", property(lambda self: bool(self.met)))

    assert _first_caught() is not None


def test_given_a_dependency_met_without_its_condition_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Known-bad: each finisher adds itself to met with a blind PUT (no If-Match):
    # two finishers at once each write their own list, one success is lost,
    # and the continuation waits forever.
    real = writes.put_conditional

    def blind(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("reason") == "dependency-met":
            kwargs["if_match"] = None
        return real(*args, **kwargs)

    monkeypatch.setattr(release, "put_conditional", blind)

    assert _first_caught() is not None


def test_given_a_keyed_repair_that_writes_the_entry_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Known-bad: a repeat of enqueue(key=K, after=[...]) whose first producer crashed
    # between its two writes repairs with a pending entry (regressions.py has its main-sweep seed).
    regression = next(r for r in REGRESSIONS if r.name == "keyed-repair-writes-an-entry")
    regression.restore_bug(monkeypatch)

    assert _first_caught() is not None


def test_given_a_fan_out_that_writes_the_children_first_when_simulated_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Known-bad: the children before the continuation's record; a worker that crashes between
    # them on the parent's last attempt leaves children whose continuation was never written
    # (regressions.py has its main-sweep seed).
    regression = next(r for r in REGRESSIONS if r.name == "fan-out-writes-the-children-first")
    regression.restore_bug(monkeypatch)

    assert _first_caught() is not None


MAIN_SWEEP_SEARCH = range(400)
"""Main-sweep seeds searched for graph worlds (about one in twenty has graphs)."""


def test_given_a_promotion_before_the_last_dependency_in_the_main_sweep_then_it_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The family's fixture forces graphs into every world; the main sweep's own share applies here.
    monkeypatch.setattr(dependencies, "SHARE", 0.05)
    monkeypatch.setattr(dependencies, "FAN_OUT_SHARE", 0.5)
    monkeypatch.setattr(WaitingJob, "ready", property(lambda self: bool(self.met)))
    graph_seeds = [s for s in MAIN_SWEEP_SEARCH if dependencies.graphs_for(s) is not None]

    caught = next(
        (s for s in graph_seeds if Kind.DEPENDENCY in run_seed(s).kinds()),
        None,
    )

    assert caught is not None, (
        f"no graph world of the first {len(MAIN_SWEEP_SEARCH)} seeds caught it"
    )
    print(f"\na promotion before the last dependency: caught at main-sweep seed {caught}")
