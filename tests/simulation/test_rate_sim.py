"""The simulation of rate limits (``tests/simulation/rate.py``): its sweep and its known-bad variants.

The sweep shows no window granting more starts than its rate, no token
outside its window, no token serving two starts and no false "full",
through crashes, stalls, faults, limit changes, foreign objects and the
sweeper. Each known-bad variant (a token written without its create-only
condition; a token counted by the taker's guess of the window instead of
the server's answer; a sweeper that deletes the current window's tokens)
must be caught, as a violation of the invariant it breaks.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

import pytest

from pail.protocol.limits import rate
from pail.store.base import Store, WriteResult
from tests.simulation.rate import Kind, RateResult, run_rate_seed

SEEDS = int(os.environ.get("PAIL_SIM_RATE_SEEDS", "300"))
KNOWN_BAD_BUDGET = 40


def test_given_takers_racing_for_start_tokens_when_simulated_then_every_rate_invariant_holds() -> (
    None
):
    totals: Counter[str] = Counter()
    failures: list[RateResult] = []
    for seed in range(SEEDS):
        result = run_rate_seed(seed)
        totals.update(result.counts)
        if result.failed:
            failures.append(result)

    print(f"rate limits: {SEEDS} seeds, {dict(totals)}")
    assert not failures, "\n\n".join(f.report() for f in failures[:3])
    # The run exercised what it claims to: grants, full windows, crashes, stalls, sweeps.
    for what in ("starts", "refusals", "crashes", "freezes", "swept", "foreign", "changes"):
        assert totals[what] > 0, what


def _first_caught(kinds: set[Kind]) -> RateResult:
    for seed in range(KNOWN_BAD_BUDGET):
        result = run_rate_seed(seed)
        if result.kinds() & kinds:
            return result
    raise AssertionError(f"no seed below {KNOWN_BAD_BUDGET} caught the known-bad variant")


def _unconditional(
    store: Store, key: str, body: bytes, token: str, stats: object
) -> WriteResult | None:
    from pail.codec import META_WRITE

    return store.put(key, body, metadata={META_WRITE: token})


KNOWN_BAD: dict[str, tuple[str, Callable[..., object], set[Kind]]] = {
    "a token written without If-None-Match": (
        "_write_token",
        _unconditional,
        {Kind.OVER, Kind.SHARED},
    ),
    "a token counted by the taker's guess of the window": (
        "_counts",
        lambda result, limit, window: True,
        {Kind.WINDOW},
    ),
    "a sweeper that deletes the current window": ("_over", lambda token, now: True, {Kind.OVER}),
}


@pytest.mark.parametrize("variant", list(KNOWN_BAD))
def test_given_a_known_bad_variant_when_simulated_then_it_is_caught(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, replacement, kinds = KNOWN_BAD[variant]
    monkeypatch.setattr(rate, name, replacement)

    caught = _first_caught(kinds)

    print(f"{variant}: caught at seed {caught.seed}")
    assert caught.kinds() & kinds, caught.report()
