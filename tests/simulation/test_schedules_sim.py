"""The schedulers' family (``cron.py``): one job per tick under crashes, stalls, skew and foreign bytes.

Two or three schedulers run the tick pass at once; each crashes at the ends
of any request (and comes back with a cold cache) or freezes mid-pass; the
bucket answers 5xx, 409 and loses responses; the producer's clock is off by
up to a minute. The invariant of ``docs/schedules.md`` is checked at every
step, and the known-bad variant (a tick enqueued without its dedup) must
break it: a family whose invariant cannot fail proves nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from pail.ids import new_job_id
from pail.keys import Keys
from pail.protocol.dedup import EnqueueResult
from pail.protocol.enqueue import put_pending
from pail.protocol.schedules import Schedule, runner
from pail.protocol.writes import WriteStats
from pail.store.base import Store
from tests.simulation.cron import describe, simulate

SEEDS = range(150)
"""The CI sweep (about 6 s of CPU on one core); ``simulate`` takes the same worlds for a soak."""
BAD_SEARCH = range(60)
"""The seeds the known-bad variant must break the invariant within."""


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    # Foreign definitions and failed ticks are logged at every pass: expected here.
    logger = logging.getLogger("pail")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("seed", SEEDS)
def test_given_racing_crashing_schedulers_when_simulated_then_one_job_per_tick_and_none_missed(
    seed: int,
) -> None:
    world = simulate(seed)

    assert not world.violations, describe(world)
    assert world.passes > 0 and any(world.jobs_by_tick.values())


def test_given_the_family_when_simulated_then_its_chaos_happens() -> None:
    worlds = [simulate(seed) for seed in range(20)]

    # The sweep means something only if its worlds crash, freeze and race.
    assert sum(w.crashes for w in worlds) >= 20
    assert sum(w.freezes for w in worlds) >= 5
    assert sum(w.store.injected["timeout-after-apply"] for w in worlds) >= 20
    assert all(len(w.jobs_by_tick) >= 10 for w in worlds)


def _without_dedup(
    store: Store,
    keys: Keys,
    schedule: Schedule,
    tick: datetime,
    *,
    now: datetime,
    stats: WriteStats | None = None,
) -> EnqueueResult:
    """Known-bad: the tick's job under a fresh id, no key record tying it to the tick."""
    job_id = put_pending(store, keys, schedule.payload, new_job_id(), now=now, stats=stats)
    return EnqueueResult(job_id, created=True)


def test_given_a_tick_without_its_dedup_when_simulated_then_a_duplicate_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "enqueue_tick", _without_dedup)
    found: list[tuple[int, Any]] = []
    for seed in BAD_SEARCH:
        world = simulate(seed)
        found.extend((seed, v) for v in world.violations if v.kind == "duplicate")
        if found:
            break

    assert found, f"no seed of {BAD_SEARCH} caught a tick enqueued without its dedup"


def _forgets_the_job(
    store: Store,
    keys: Keys,
    schedule: Schedule,
    tick: datetime,
    *,
    now: datetime,
    stats: WriteStats | None = None,
) -> EnqueueResult:
    """Known-bad: the tick is recorded as done (``last_tick``) but no job is written."""
    return EnqueueResult(new_job_id(), created=True)


def test_given_a_tick_recorded_without_its_job_when_simulated_then_the_miss_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "enqueue_tick", _forgets_the_job)
    world = simulate(0)

    assert any(v.kind == "missed" for v in world.violations), describe(world)
