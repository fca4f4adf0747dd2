"""Search: by tag through the index, by enqueue time as a key range, by id prefix and state; paged."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from ulid import ULID

from pail import ConfigurationError, JobState, Pail
from pail.keys import INDEX
from pail.protocol.index import entry_key, tag_prefix
from tests.support.counting import RequestCounter
from tests.support.hooked_store import HookedStore, SimulatedCrash

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _ids_at(*minutes: int) -> list[str]:
    """ULIDs made at T0 + each minute: jobs 'enqueued' then, whatever the wall clock says."""
    return [str(ULID.from_datetime(T0 + timedelta(minutes=m))) for m in minutes]


def test_given_tagged_jobs_among_others_when_search_by_tag_then_exactly_them_oldest_first(
    pail: Pail, counter: RequestCounter
) -> None:
    tags = [{"customer": "acme"} if n % 10 == 0 else {"customer": f"c{n}"} for n in range(200)]
    ids = pail.enqueue_many([{"n": n} for n in range(200)], tags=tags)
    before = counter.by_operation

    page = pail.search(tags={"customer": "acme"})

    assert [job.id for job in page.jobs] == sorted(ids[::10])
    assert all(job.tags == {"customer": "acme"} for job in page.jobs)
    spent = counter.by_operation - before
    # One LIST of the tag's key range (never queue/ or any state prefix), one read per match.
    assert spent["ListObjectsV2"] == 1 and page.requests["ListObjectsV2"] == 1
    assert spent == page.requests
    assert page.plan == "index" and not page.more


def test_given_many_matches_when_paged_then_every_job_once_in_order(pail: Pail) -> None:
    ids = pail.enqueue_many([{"n": n} for n in range(7)], tags={"kind": "export"})

    seen: list[str] = []
    after = None
    for _ in range(10):
        page = pail.search(tags={"kind": "export"}, limit=3, after=after)
        seen += [job.id for job in page.jobs]
        if not page.more:
            break
        after = page.next_after
    assert seen == sorted(ids)


def test_given_two_tags_when_search_then_both_must_match(pail: Pail) -> None:
    both = pail.enqueue({"n": 1}, tags={"customer": "acme", "kind": "export"})
    pail.enqueue({"n": 2}, tags={"customer": "acme", "kind": "import"})
    pail.enqueue({"n": 3}, tags={"kind": "export"})

    page = pail.search(tags={"customer": "acme", "kind": "export"})
    assert [job.id for job in page.jobs] == [both]


def test_given_jobs_over_an_hour_when_search_a_window_then_a_key_range_of_them(
    pail: Pail, counter: RequestCounter
) -> None:
    ids = _ids_at(0, 10, 20, 30, 40, 50)
    pail.enqueue_many([{"n": n} for n in range(6)], ids=ids, tags={"customer": "acme"})
    pail.enqueue({"late": True})  # now: outside the window
    since, until = T0 + timedelta(minutes=15), T0 + timedelta(minutes=40)

    by_time = pail.search(since=since, until=until)
    by_tag_and_time = pail.search(tags={"customer": "acme"}, since=since, until=until)

    assert [job.id for job in by_time.jobs] == ids[2:5]
    assert [job.id for job in by_tag_and_time.jobs] == ids[2:5]
    # The window is a key range: only the three jobs in it were read, one HEAD + GET each.
    assert by_time.candidates == 3 and by_tag_and_time.candidates == 3
    assert by_tag_and_time.requests == {"ListObjectsV2": 1, "HeadObject": 3, "GetObject": 3}


def test_given_a_state_when_search_then_only_jobs_in_it(pail: Pail) -> None:
    ids = sorted(pail.enqueue_many([{"n": n} for n in range(4)], tags={"customer": "acme"}))
    assert pail.work_once(lambda payload: {"ok": True})  # the oldest is done
    pail.cancel(ids[3])

    done = pail.search(tags={"customer": "acme"}, state="done")
    pending = pail.search(state="pending", since=timedelta(hours=1))
    cancelled = pail.search(state=JobState.CANCELLED, tags={"customer": "acme"})

    assert [job.id for job in done.jobs] == ids[:1]
    assert [job.id for job in pending.jobs] == ids[1:3]
    assert [job.id for job in cancelled.jobs] == ids[3:]
    assert pail.search(state="done", since=timedelta(hours=1)).requests["ListObjectsV2"] == 1


def test_given_an_id_prefix_when_search_then_the_jobs_whose_id_starts_with_it(pail: Pail) -> None:
    ids = _ids_at(0, 0, 60 * 24 * 40)  # two share their time prefix; one is 40 days later
    pail.enqueue_many([{}, {}, {}], ids=ids)

    page = pail.search(id_prefix=ids[0][:10])
    assert [job.id for job in page.jobs] == ids[:2]
    assert [job.id for job in pail.search(id_prefix=ids[2]).jobs] == ids[2:]


def test_given_foreign_keys_in_the_index_when_search_then_skipped_never_raised(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"n": 1}, tags={"customer": "acme"})
    prefix = tag_prefix(pail.keys, "customer", "acme")
    for key, body in [
        (prefix, b""),  # a console folder marker
        (f"{prefix}a/b", b"x"),  # a nested key
        (f"{prefix}not-a-job", b"\xff\xfe"),  # not a ULID, no such job
        (f"{INDEX}tag/%ff=%zz/{job_id}", b""),  # a malformed tag
        (f"{INDEX}garbage", b"{" * 1000),
    ]:
        pail.store.put(key, body)

    page = pail.search(tags={"customer": "acme"})

    assert [job.id for job in page.jobs] == [job_id]


def test_given_an_entry_whose_job_is_gone_when_search_then_an_old_one_is_deleted(
    pail: Pail,
) -> None:
    old, young = str(ULID.from_datetime(datetime.now(UTC) - timedelta(days=9))), str(ULID())
    for job_id in (old, young):
        pail.store.put(entry_key(pail.keys, "customer", "acme", job_id), b"")

    page = pail.search(tags={"customer": "acme"})

    assert page.jobs == ()
    left = [i.key for i in pail.store.list(tag_prefix(pail.keys, "customer", "acme")).items]
    # The old one's job expired with its result; the young one's producer may be writing it.
    assert left == [entry_key(pail.keys, "customer", "acme", young)]
    assert page.requests.get("DeleteObject") == 1


def test_given_hostile_tag_values_when_search_then_returned_as_the_text_they_are(
    pail: Pail,
) -> None:
    hostile = {"customer": "<img src=x onerror=alert(1)>", "path": "../../etc/passwd?a=b&c=%2F"}
    job_id = pail.enqueue({"n": 1}, tags=hostile)

    (found,) = pail.search(tags={"path": hostile["path"]}).jobs
    assert found.id == job_id and found.tags == hostile


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"state": "finished"}, "unknown job state"),
        ({"since": datetime(2026, 1, 1)}, "aware datetime"),
        ({"since": T0, "until": T0 - timedelta(seconds=1)}, "before since"),
        ({"id_prefix": "a/b"}, "no '/'"),
        ({"tags": {"bad key": "x"}}, "tag key"),
        ({"limit": 0}, "limit"),
    ],
)
def test_given_a_bad_query_when_search_then_configuration_error_and_no_request(
    pail: Pail, counter: RequestCounter, kwargs: dict[str, object], says: str
) -> None:
    before = counter.total()
    with pytest.raises(ConfigurationError, match=says):
        pail.search(**kwargs)  # type: ignore[arg-type]
    assert counter.total() == before


def test_given_a_sharded_queue_when_search_by_time_then_every_shard_is_a_range(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(shards=4)
    ids = pail.enqueue_many([{"n": n} for n in range(8)], ids=_ids_at(*range(8)))

    page = pail.search(since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=5))

    assert [job.id for job in page.jobs] == ids[2:6]


def _crash() -> None:
    raise SimulatedCrash


def test_given_a_producer_that_dies_between_the_index_and_the_entry_then_no_job_and_search_skips_it(
    pail: Pail, hooked: HookedStore
) -> None:
    crashing = Pail(hooked)
    hooked.before("put", pail.keys.prefix("queue/"), _crash)
    with pytest.raises(SimulatedCrash):
        crashing.enqueue({"n": 1}, tags={"customer": "acme"})
    survivor = pail.enqueue({"n": 2}, tags={"customer": "acme"})

    page = pail.search(tags={"customer": "acme"})

    # The orphan entry is read (its job is found nowhere) and skipped; young, it is kept.
    assert [job.id for job in page.jobs] == [survivor]
    assert page.candidates == 2
    assert len(pail.store.list(tag_prefix(pail.keys, "customer", "acme")).items) == 2


def test_given_a_producer_that_dies_between_two_tags_then_nothing_is_enqueued_and_a_resend_is_found(
    pail: Pail, hooked: HookedStore
) -> None:
    crashing = Pail(hooked)
    hooked.before("put", tag_prefix(pail.keys, "kind", "export"), _crash)
    with pytest.raises(SimulatedCrash):
        crashing.enqueue({"n": 1}, tags={"customer": "acme", "kind": "export"})
    assert pail.stats().pending == 0  # the entry goes last: no job without its index

    job_id = crashing.enqueue({"n": 1}, tags={"customer": "acme", "kind": "export"})

    assert [job.id for job in pail.search(tags={"kind": "export"}).jobs] == [job_id]
    assert [job.id for job in pail.search(tags={"customer": "acme"}).jobs] == [job_id]
