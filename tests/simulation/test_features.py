"""The features beyond the original under the deterministic simulation: dedup, delay, cancel.

``features.py`` describes the run and its extra invariants. Seeds are cheap
(a few jobs each): fixed ones and the day's (``seeds.FamilySeeds``,
``PAIL_SIM_FEATURE_SEEDS`` and ``PAIL_SIM_FEATURE_NEW_SEEDS``).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

from pail.errors import PailError
from pail.keys import Keys
from pail.protocol import cancel, claim, delay
from pail.protocol.lease import Lease
from pail.store.base import ListPage, Store
from tests.simulation import steps
from tests.simulation.features import run_feature_seed
from tests.simulation.harness import STRUCK, struck, triples
from tests.simulation.invariants import Kind
from tests.simulation.seeds import FamilySeeds
from tests.simulation.sweep import SWEEP_TIMEOUT

SEEDS = FamilySeeds.of("FEATURE", fixed=500, fresh=500)
COMMIT_SEEDS = FamilySeeds.of("FEATURE_COMMIT", fixed=250, fresh=250)
"""The cancels that stop at their commit point: a variant of the same worlds."""
KNOWN_BAD_SEEDS = 500
"""Each known-bad claim below must be caught within this many calm seeds (it takes a few)."""


@pytest.mark.timeout(SWEEP_TIMEOUT)
def test_given_keyed_enqueues_and_cancels_under_chaos_when_simulated_then_every_invariant_holds() -> (
    None
):
    failures, counts = _sweep(SEEDS)

    hit = struck(counts) & triples()
    shown = {k: v for k, v in sorted(counts.items()) if not k.startswith(f"{STRUCK} ")}
    print(f"\nfeature simulation ({SEEDS}): {shown}")
    print(f"  aimed faults struck {len(hit)} of {len(triples())} triples (test_coverage: all)")
    assert counts["cancels"] > 0 and counts["delayed"] > 0 and counts["high_priority"] > 0
    assert counts["progress"] > 0
    assert counts["crashes"] > 0 and counts["stalls"] > 0
    assert not failures, "\n\n".join(failures[:2])


@pytest.mark.timeout(SWEEP_TIMEOUT)
def test_given_cancels_that_stop_at_their_commit_point_when_simulated_then_claims_finish_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A producer that dies right after marking the entry: the claims must end the job, unrun."""
    _stop_cancels_after_commit(monkeypatch)

    failures, counts = _sweep(COMMIT_SEEDS)

    assert counts["cancel_stopped"] > 0
    assert not failures, "\n\n".join(failures[:2])


def test_given_claims_that_run_cancelled_entries_when_simulated_then_the_ledger_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cancellation invariant can fail: put back a claim that ignores the cancelled flag."""
    _stop_cancels_after_commit(monkeypatch)
    real_try = steps.CLAIM_TRY.current

    def run_cancelled(self: claim.Claimer, key: str) -> Lease | claim.Skip:
        entry = self._store.get(key)
        if entry is not None and b'"cancelled":true' in entry.body:
            body = entry.body.replace(b'"cancelled":true', b'"cancelled":false')
            self._store.put(key, body, if_match=entry.etag, metadata=dict(entry.metadata))
        return real_try(self, key)

    steps.CLAIM_TRY.replace(monkeypatch, run_cancelled)
    kinds: set[Kind] = set()
    for seed in range(KNOWN_BAD_SEEDS):
        kinds |= run_feature_seed(seed, chaos=False).kinds()
        if Kind.RAN_AFTER_END in kinds:
            break

    assert Kind.RAN_AFTER_END in kinds


class CancelStoppedError(PailError):
    """A ``cancel`` call that stopped right after its commit point: it returns nothing."""


def _stop_cancels_after_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Pail.cancel`` stops (as if its process died) once the entry is marked; claims do not.

    It stops in ``cancel_entry``, the steps after the commit point, which claims never call.
    """
    real_finish = steps.CANCEL_FINISH_PENDING.current

    def finish(*args: Any, **kwargs: Any) -> bool:
        if sys._getframe(1).f_code is cancel.cancel_entry.__code__:
            raise CancelStoppedError("stopped after marking the entry")
        return real_finish(*args, **kwargs)

    steps.CANCEL_FINISH_PENDING.replace(monkeypatch, finish)


def _sweep(seeds: FamilySeeds) -> tuple[list[str], Counter[str]]:
    failures: list[str] = []
    counts: Counter[str] = Counter()
    for seed in seeds.all():
        outcome = run_feature_seed(seed)
        counts.update(outcome.counts)
        if outcome.failed:
            failures.append(outcome.report())
    return failures, counts


def test_given_claims_that_promote_delayed_jobs_early_when_simulated_then_the_ledger_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The due-time invariant can fail: put back a claim that promotes every delayed entry."""

    def eager(
        store: Store, keys: Keys, page: ListPage, *, page_size: int, stats: Any = None
    ) -> tuple[list[str], int]:
        ready: list[str] = []
        for item in page.items:
            parsed = delay.parse(keys, item.key)
            promoted = delay.promote(store, keys, item.key, parsed[1]) if parsed else item.key
            if promoted is not None:
                ready.append(promoted)
        return ready, 0

    steps.CLAIM_READY_KEYS.replace(monkeypatch, eager)
    kinds: set[Kind] = set()
    for seed in range(KNOWN_BAD_SEEDS):
        kinds |= run_feature_seed(seed, chaos=False).kinds()
        if Kind.RAN_AFTER_END in kinds:
            break

    assert Kind.RAN_AFTER_END in kinds
