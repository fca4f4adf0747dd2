"""Claims are starvation-free on a listing in no order (S3 Express directory buckets).

In a standard bucket, delayed and high-priority entries sort before every
job id, so the first page of any refill shows them. A directory bucket lists
in no order: they are anywhere among the keys. The claimer then walks each
source's listing page after page across refills (``pail.protocol.claim``,
"Unordered listings"), so every entry due is promoted within the stated
bound of claims: ``sources * ceil(backlog / page) * UNORDERED_CLAIMS_PER_PAGE``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from pail import Pail
from pail.clock import ManualClock
from pail.protocol.claim import DEFAULT_PAGE_SIZE, UNORDERED_CLAIMS_PER_PAGE, Claimer
from tests.support.shuffled_store import ShuffledStore

BACKLOG = 10_000
HIGH = 20
DELAYED = 20


@pytest.mark.parametrize("shards", [1, 4])
def test_every_high_and_due_entry_is_claimed_within_the_bound(shards: int) -> None:
    clock = ManualClock(wall=datetime(2026, 1, 1, tzinfo=UTC))
    store = ShuffledStore(salt=f"s{shards}", now=clock.now)
    pail = Pail(store, shards=shards, clock=clock)
    ids = pail.enqueue_many([{"kind": "normal"}] * BACKLOG)
    assert len(ids) == BACKLOG
    urgent = {pail.enqueue({"kind": "high"}, priority="high") for _ in range(HIGH)}
    urgent |= {pail.enqueue({"kind": "delayed"}, delay=60) for _ in range(DELAYED)}
    clock.advance(61)  # every delayed entry is due now
    total = BACKLOG + HIGH + DELAYED
    sources = len(pail.keys.sources())
    per_source = math.ceil(total / max(1, sources - 1)) if shards > 1 else total
    bound = sources * math.ceil(per_source / DEFAULT_PAGE_SIZE) * UNORDERED_CLAIMS_PER_PAGE
    # The bound is far below the backlog: a claimer that restarted each
    # listing from its top would take ~backlog claims to reach the last page.
    assert bound <= BACKLOG // 5
    claimer = Claimer(store, pail.keys, visibility_timeout=30, clock=clock, owner="w")
    claimed_at: dict[str, int] = {}
    for n in range(1, bound + 1):
        lease = claimer.claim()
        assert lease is not None
        if lease.job_id in urgent:
            claimed_at[lease.job_id] = n
        if len(claimed_at) == len(urgent):
            break
    missing = urgent - set(claimed_at)
    assert not missing, f"{len(missing)} urgent jobs not claimed within {bound} claims"
    assert max(claimed_at.values()) <= bound
    # LIST cost stays O(1) per claim: at most one refill per
    # UNORDERED_CLAIMS_PER_PAGE claims, plus the empty flat source's LISTs.
    claims = max(claimed_at.values())
    assert claimer.lists <= 2 * math.ceil(claims / UNORDERED_CLAIMS_PER_PAGE) + sources
