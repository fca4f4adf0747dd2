"""Keys that name no job, over the in-memory store: they never hide the queue, never count.

The console's zero-byte folders and someone's nested files can fill whole
listing pages; a claimer reads past them (a bounded number of pages) and
nothing counts or touches them. The same rule on the real server is
tests/reliability/test_foreign_bytes.py.
"""

from __future__ import annotations

from pail import ManualClock, MemoryStore, Pail
from pail.keys import QUEUE, Keys
from pail.protocol.claim import MAX_FOREIGN_PAGES, Claimer


def _claimer(store: MemoryStore, page_size: int) -> Claimer:
    return Claimer(
        store,
        Keys(),
        visibility_timeout=30,
        clock=ManualClock(),
        owner="test",
        page_size=page_size,
    )


def test_given_pages_of_nested_keys_ahead_of_a_job_when_claiming_then_the_job_is_found() -> None:
    store = MemoryStore("jobs")
    pail = Pail(store)
    store.put("queue/", b"")
    for n in range(9):  # sorts before any ULID, in byte order
        store.put(f"queue/00archive/{n}.json", b'{"payload": 1, "attempts": 0}')
    job_id = pail.enqueue({"n": 1})

    lease = _claimer(store, page_size=2).claim()

    assert lease is not None and lease.job_id == job_id
    assert all(store.get(f"queue/00archive/{n}.json") is not None for n in range(9))
    assert pail.stats().pending == 0


def test_given_more_foreign_pages_than_the_bound_when_claiming_then_the_claim_ends() -> None:
    store = MemoryStore("jobs")
    for n in range(2 * (MAX_FOREIGN_PAGES + 2)):
        store.put(f"queue/00archive/{n:03d}", b"")
    claimer = _claimer(store, page_size=2)

    assert claimer.claim() is None  # the queue looks empty: bounded, never a loop
    assert claimer.lists <= (MAX_FOREIGN_PAGES + 1) * 3


def test_given_keys_that_name_no_job_then_entry_id_says_none() -> None:
    keys = Keys("reports")
    for key in ("reports/queue/", "reports/queue/a/", "reports/queue/a/b", "queue/x"):
        assert keys.entry_id(key, QUEUE) is None
    assert keys.entry_id("reports/queue/01J0000000000000000000000A", QUEUE) == (
        "01J0000000000000000000000A"
    )
