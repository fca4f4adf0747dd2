"""Search on a store that lists in no order and takes no StartAfter (a directory bucket).

The window and the cursor are then applied to a listing of the whole prefix;
the pages must still come out oldest first, each job once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ulid import ULID

from pail import Pail
from pail.store import MemoryStore

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _queue() -> tuple[Pail, list[str]]:
    pail = Pail(MemoryStore("jobs--use1-az4--x-s3", ordered_listing=False))
    ids = [str(ULID.from_datetime(T0 + timedelta(minutes=n))) for n in range(30)]
    tags = [{"customer": "acme"} if n % 2 == 0 else {"customer": "globex"} for n in range(30)]
    pail.enqueue_many([{"n": n} for n in range(30)], ids=ids, tags=tags)
    return pail, ids


def test_given_an_unordered_store_when_paging_a_tag_in_a_window_then_oldest_first_each_once() -> (
    None
):
    pail, ids = _queue()
    since, until = T0 + timedelta(minutes=5), T0 + timedelta(minutes=24)

    seen: list[str] = []
    after = None
    for _ in range(10):
        page = pail.search(
            tags={"customer": "acme"}, since=since, until=until, limit=4, after=after
        )
        seen += [job.id for job in page.jobs]
        if not page.more:
            break
        after = page.next_after
    assert seen == [job_id for n, job_id in enumerate(ids) if n % 2 == 0 and 5 <= n <= 24]


def test_given_an_unordered_store_when_searching_a_window_then_the_jobs_in_it_in_order() -> None:
    pail, ids = _queue()

    page = pail.search(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=12))

    assert [job.id for job in page.jobs] == ids[10:13]


def test_given_any_millisecond_when_its_time_prefix_is_taken_then_it_is_the_ulids_own() -> None:
    from pail.protocol.index.ranges import time_prefix

    for when in (T0, datetime(1970, 1, 1, tzinfo=UTC), datetime(2099, 12, 31, 23, 59, tzinfo=UTC)):
        assert time_prefix(when) == str(ULID.from_datetime(when))[:10]
    earlier, later = time_prefix(T0), time_prefix(T0 + timedelta(milliseconds=1))
    assert earlier < later  # byte order is time order
