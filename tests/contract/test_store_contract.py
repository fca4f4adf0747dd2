"""The storage contract of ``pail.store.base``, clause by clause, on every backend.

Each test runs on ``memory`` (MemoryStore), ``moto`` (S3Store on LocalS3) and
``seaweed`` (S3Store on SeaweedFS), each time on a fresh bucket; see
``conftest.py``. Two real servers written independently keep the fake honest:
where they agree with each other and with AWS's documentation, the fake must
agree too.

Divergences found, and what the contract makes of them:

* **"missing" on a failed condition.** ``If-Match`` on a missing key: AWS and
  moto answer 404 NoSuchKey (so ``ConditionFailedError.missing`` is True);
  SeaweedFS answers 412 PreconditionFailed, the same as a stale ETag, so
  ``missing`` is False there. The same holds for ``DeleteObject If-Match``.
  The contract therefore promises ``ConditionFailedError`` in both cases, and
  ``missing=True`` only where ``backend.reports_missing``; the tests pin each
  backend's actual answer so a change on either side shows. Callers must treat
  ``missing`` as a hint and confirm absence with ``head`` when it matters.
* **Same bytes, same ETag.** On S3 (and both servers) a single-part ETag is the
  MD5 of the body, so rewriting identical bytes yields the same ETag, and a
  compare-and-swap cannot see an A-B-A rewrite. MemoryStore makes every ETag
  unique. The contract only promises a new ETag for a different body; the
  protocol must put a fresh token in every body it writes.
* **Listing order.** SeaweedFS lists in directory-tree order ("queue/a/x" sorts
  before "queue/a-1" because it walks folder "a" first), not byte order. For
  fixed-width ASCII keys directly under one prefix both orders agree, which is
  what the protocol uses and what these tests check.
* **A missing bucket.** GET, PUT, DELETE and LIST answer NoSuchBucket, and
  the store raises ``BucketNotFoundError`` naming it, except that SeaweedFS
  checks ``If-Match`` before the bucket and answers 412, which the store can
  only report as ``ConditionFailedError``. HEAD answers a bodiless 404 on every
  server, which ``S3Store.head`` cannot tell from a missing key, so it returns
  None.
"""

from __future__ import annotations

import functools
import random
import re
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest

from pail.errors import BucketNotFoundError, ConditionFailedError
from pail.store.base import Store, WriteResult
from pail.store.memory import MemoryStore
from tests.contract.conftest import Backend
from tests.racing import race

PREFIX = "queue/"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
RESOLUTION = timedelta(seconds=1)
"""Date and Last-Modified have one-second resolution; both come from the server's clock."""
RACERS = 8


def ulid_like_keys(count: int, *, seed: int) -> list[str]:
    """``count`` distinct 26-character uppercase Crockford keys under ``queue/``, unsorted."""
    rng = random.Random(seed)
    keys: set[str] = set()
    while len(keys) < count:
        keys.add(PREFIX + "".join(rng.choice(CROCKFORD) for _ in range(26)))
    ordered = sorted(keys)
    rng.shuffle(ordered)
    return ordered


def list_all(store: Store, prefix: str, *, max_keys: int = 1000) -> list[str]:
    """Every key under ``prefix`` in the server's order, following continuation tokens."""
    keys: list[str] = []
    token: str | None = None
    while True:
        page = store.list(prefix, max_keys=max_keys, continuation=token)
        keys.extend(item.key for item in page.items)
        token = page.next_token
        if token is None:
            return keys


def body_of(store: Store, key: str) -> bytes | None:
    found = store.get(key)
    return None if found is None else found.body


# --- the port itself -------------------------------------------------------------


def test_given_any_backend_then_it_is_a_store_with_byte_ordered_listing(store: Store) -> None:
    assert isinstance(store, Store)
    assert store.ordered_listing is True  # none of these buckets is a directory bucket


# --- create-only: put(if_none_match=True) ----------------------------------------


def test_given_absent_key_when_put_if_none_match_then_object_is_created(store: Store) -> None:
    result = store.put("queue/a", b'{"n": 1}', if_none_match=True)

    found = store.get("queue/a")
    assert found is not None
    assert found.body == b'{"n": 1}'
    assert found.etag == result.etag


def test_given_existing_key_when_put_if_none_match_then_condition_fails_and_body_unchanged(
    store: Store,
) -> None:
    first = store.put("queue/a", b"first", if_none_match=True)

    with pytest.raises(ConditionFailedError) as failed:
        store.put("queue/a", b"second", if_none_match=True)

    assert failed.value.key == "queue/a"
    assert failed.value.missing is False
    found = store.get("queue/a")
    assert found is not None
    assert (found.body, found.etag) == (b"first", first.etag)


def test_given_deleted_key_when_put_if_none_match_then_object_is_created_again(
    store: Store,
) -> None:
    store.put("queue/a", b"first", if_none_match=True)
    store.delete("queue/a")

    store.put("queue/a", b"second", if_none_match=True)

    assert body_of(store, "queue/a") == b"second"


def test_given_racing_creators_when_put_if_none_match_then_exactly_one_wins(
    backend: Backend,
) -> None:
    store = backend.store

    def create(key: str, index: int) -> bool:
        try:
            store.put(key, f"writer-{index}".encode(), if_none_match=True)
        except ConditionFailedError:
            return False
        return True

    with ThreadPoolExecutor(RACERS) as executor:
        for round_ in range(backend.race_rounds):
            key = f"queue/race-{round_:04d}"
            won = race(executor, RACERS, functools.partial(create, key))

            assert won.count(True) == 1, f"round {round_}: {won.count(True)} winners"
            assert body_of(store, key) == f"writer-{won.index(True)}".encode()


# --- compare-and-swap: put(if_match=etag) ----------------------------------------


def test_given_current_etag_when_put_if_match_then_body_replaced_and_etag_changes(
    store: Store,
) -> None:
    first = store.put("queue/a", b"first")

    second = store.put("queue/a", b"second", if_match=first.etag)

    assert second.etag != first.etag
    found = store.get("queue/a")
    assert found is not None
    assert (found.body, found.etag) == (b"second", second.etag)


def test_given_stale_etag_when_put_if_match_then_condition_fails_and_body_unchanged(
    store: Store,
) -> None:
    stale = store.put("queue/a", b"first")
    current = store.put("queue/a", b"second", if_match=stale.etag)

    with pytest.raises(ConditionFailedError) as failed:
        store.put("queue/a", b"third", if_match=stale.etag)

    assert failed.value.missing is False
    found = store.get("queue/a")
    assert found is not None
    assert (found.body, found.etag) == (b"second", current.etag)


def test_given_absent_key_when_put_if_match_then_condition_fails_and_nothing_is_created(
    backend: Backend,
) -> None:
    store = backend.store
    gone = store.put("queue/a", b"first")
    store.delete("queue/a")

    with pytest.raises(ConditionFailedError) as failed:
        store.put("queue/a", b"second", if_match=gone.etag)

    # AWS and moto: 404 NoSuchKey, so missing=True. SeaweedFS: 412, missing=False.
    assert failed.value.missing is backend.reports_missing
    assert store.head("queue/a") is None


def test_given_racing_writers_with_same_etag_when_put_if_match_then_exactly_one_wins(
    backend: Backend,
) -> None:
    store = backend.store

    def swap(key: str, etag: str, index: int) -> WriteResult | None:
        try:
            return store.put(key, f"writer-{index}".encode(), if_match=etag)
        except ConditionFailedError:
            return None

    with ThreadPoolExecutor(RACERS) as executor:
        for round_ in range(backend.race_rounds):
            key = f"queue/cas-{round_:04d}"
            etag = store.put(key, b"initial").etag
            results = race(executor, RACERS, functools.partial(swap, key, etag))

            winners = [i for i, result in enumerate(results) if result is not None]
            assert len(winners) == 1, f"round {round_}: {len(winners)} winners"
            found = store.get(key)
            assert found is not None
            winner = results[winners[0]]
            assert winner is not None
            assert (found.body, found.etag) == (f"writer-{winners[0]}".encode(), winner.etag)


# --- conditional delete: delete(if_match=etag) -----------------------------------


def test_given_current_etag_when_delete_if_match_then_object_is_gone(store: Store) -> None:
    written = store.put("queue/a", b"body")

    store.delete("queue/a", if_match=written.etag)

    assert store.get("queue/a") is None


def test_given_stale_etag_when_delete_if_match_then_condition_fails_and_object_kept(
    store: Store,
) -> None:
    stale = store.put("queue/a", b"first")
    store.put("queue/a", b"second")

    with pytest.raises(ConditionFailedError) as failed:
        store.delete("queue/a", if_match=stale.etag)

    assert failed.value.missing is False
    assert body_of(store, "queue/a") == b"second"


def test_given_absent_key_when_delete_if_match_then_condition_fails(backend: Backend) -> None:
    store = backend.store
    gone = store.put("queue/a", b"body")
    store.delete("queue/a")

    with pytest.raises(ConditionFailedError) as failed:
        store.delete("queue/a", if_match=gone.etag)

    # As for put(if_match=...): SeaweedFS answers 412 where moto and AWS say 404.
    assert failed.value.missing is backend.reports_missing


# --- unconditional writes, reads and deletes -------------------------------------


def test_given_absent_key_when_delete_then_no_error(store: Store) -> None:
    store.delete("queue/never-written")

    assert store.head("queue/never-written") is None


def test_given_existing_key_when_delete_then_get_and_head_return_none(store: Store) -> None:
    store.put("queue/a", b"body")

    store.delete("queue/a")

    assert store.get("queue/a") is None
    assert store.head("queue/a") is None


def test_given_absent_key_when_get_or_head_then_none(store: Store) -> None:
    assert store.get("queue/missing") is None
    assert store.head("queue/missing") is None


def test_given_existing_key_when_put_without_condition_then_overwritten(store: Store) -> None:
    store.put("queue/a", b"first")

    second = store.put("queue/a", b"second")

    found = store.get("queue/a")
    assert found is not None
    assert (found.body, found.etag) == (b"second", second.etag)


def test_given_body_and_metadata_when_put_then_get_and_head_return_them(store: Store) -> None:
    body = bytes(range(256))  # not UTF-8: bodies are bytes, untouched
    metadata = {"pail-write": "01JD5ZV1K3Q9W8E7R6T5Y4U3I2", "pail-attempt": "2"}

    written = store.put("queue/a", body, metadata=metadata)

    found = store.get("queue/a")
    info = store.head("queue/a")
    assert found is not None
    assert info is not None
    assert (found.key, found.body, found.etag) == ("queue/a", body, written.etag)
    assert dict(found.metadata) == metadata
    assert (info.key, info.etag, info.size) == ("queue/a", written.etag, len(body))
    assert dict(info.metadata) == metadata
    assert found.last_modified.tzinfo is not None
    assert info.last_modified == found.last_modified


def test_given_successive_writes_of_different_bodies_then_each_has_a_new_etag_seen_everywhere(
    store: Store,
) -> None:
    etags = []
    for n in range(4):
        written = store.put("queue/a", f"version {n}".encode())
        info = store.head("queue/a")
        (listed,) = store.list(PREFIX).items
        assert info is not None
        assert info.etag == listed.etag == written.etag
        assert listed.size == len(f"version {n}")
        etags.append(written.etag)

    # Only different bodies are promised different ETags: on S3 the ETag is
    # the body's MD5, so identical bytes would repeat one (see module docstring).
    assert len(set(etags)) == len(etags)


# --- listings --------------------------------------------------------------------


def test_given_no_keys_when_listed_then_empty_page_without_token(store: Store) -> None:
    page = store.list(PREFIX)

    assert page.items == ()
    assert page.next_token is None


def test_given_fixed_width_keys_written_in_random_order_when_listed_then_byte_order(
    store: Store,
) -> None:
    keys = ulid_like_keys(30, seed=1)
    for key in keys:
        store.put(key, b"{}")

    listed = [item.key for item in store.list(PREFIX).items]

    assert listed == sorted(keys)


def test_given_more_keys_than_max_keys_when_paging_then_every_key_once_in_byte_order(
    store: Store,
) -> None:
    keys = ulid_like_keys(23, seed=2)
    for key in keys:
        store.put(key, b"{}")

    pages = []
    token: str | None = None
    while True:
        page = store.list(PREFIX, max_keys=5, continuation=token)
        pages.append([item.key for item in page.items])
        token = page.next_token
        if token is None:
            break

    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert [key for page in pages for key in page] == sorted(keys)


def test_given_start_after_when_listed_then_only_later_keys_in_order(store: Store) -> None:
    keys = sorted(ulid_like_keys(12, seed=3))
    for key in keys:
        store.put(key, b"{}")

    listed = [item.key for item in store.list(PREFIX, start_after=keys[4]).items]

    assert listed == keys[5:]


def test_given_start_after_and_max_keys_when_paging_then_continues_after_start(
    store: Store,
) -> None:
    keys = sorted(ulid_like_keys(12, seed=4))
    for key in keys:
        store.put(key, b"{}")

    first = store.list(PREFIX, max_keys=3, start_after=keys[2])
    assert first.next_token is not None
    rest = store.list(PREFIX, max_keys=100, start_after=keys[2], continuation=first.next_token)

    assert [item.key for item in first.items + rest.items] == keys[3:]
    assert rest.next_token is None


def test_given_other_prefixes_when_listed_then_only_keys_under_the_prefix(store: Store) -> None:
    inside = ["queue/0001", "queue/0002"]
    outside = ["run/0001", "done/0001", "queue-archive/0001", "queuf/0001"]
    for key in inside + outside:
        store.put(key, b"{}")

    assert list_all(store, PREFIX) == inside
    assert list_all(store, "run/") == ["run/0001"]


# --- the server's clock ----------------------------------------------------------


def test_given_put_then_server_time_is_close_to_last_modified(store: Store) -> None:
    began = time.monotonic()
    written = store.put("queue/a", b"{}")
    took = timedelta(seconds=time.monotonic() - began)

    info = store.head("queue/a")

    assert info is not None
    assert written.server_time.tzinfo is not None
    # Both are the server's clock during this one PUT: apart by no more than the PUT took
    # (measured, so a loaded machine widens the bound instead of failing it), plus rounding.
    assert abs(written.server_time - info.last_modified) <= took + RESOLUTION


def test_given_list_then_server_time_is_present_and_not_before_last_modified(
    store: Store,
) -> None:
    began = time.monotonic()
    store.put("queue/a", b"{}")

    page = store.list(PREFIX)
    took = timedelta(seconds=time.monotonic() - began)

    (item,) = page.items
    assert isinstance(page.server_time, datetime)
    assert page.server_time.tzinfo is not None
    # Listed after the write: not earlier than it, beyond rounding; and no later than the
    # write and the listing took together (measured), beyond rounding.
    earliest = item.last_modified - RESOLUTION
    assert earliest <= page.server_time <= item.last_modified + took + RESOLUTION


# --- presigned reads -------------------------------------------------------------


def test_given_object_when_presigned_url_fetched_then_body_is_returned(
    backend: Backend,
) -> None:
    if not backend.is_server:
        pytest.skip("MemoryStore presigns memory:// URLs, which nothing can fetch")
    backend.store.put("done/a", b'{"result": 42}')

    url = backend.store.presign_get("done/a", 60)

    with urllib.request.urlopen(url, timeout=10) as response:  # a loopback http:// URL
        assert response.read() == b'{"result": 42}'


def test_given_memory_store_when_presigned_then_memory_url_names_bucket_and_key() -> None:
    store = MemoryStore("jobs")

    assert store.presign_get("done/a", 60) == "memory://jobs/done/a?expires_in=60"


# --- a missing bucket ------------------------------------------------------------


def test_given_missing_bucket_when_any_call_then_bucket_not_found_error_names_it(
    backend: Backend,
) -> None:
    if not backend.is_server:
        pytest.skip("MemoryStore has no buckets to be missing")
    missing = f"{backend.store.bucket}-missing"
    store = backend.store_for(missing)

    for call in (
        lambda: store.get("queue/a"),
        lambda: store.put("queue/a", b"{}"),
        lambda: store.put("queue/a", b"{}", if_none_match=True),
        lambda: store.delete("queue/a"),
        lambda: store.delete("queue/a", if_match='"0"'),
        lambda: store.list(PREFIX),
    ):
        # Not ConditionFailedError(missing=True): NoSuchBucket is a 404 as well.
        with pytest.raises(BucketNotFoundError, match=re.escape(repr(missing))):
            call()


def test_given_missing_bucket_when_put_if_match_then_bucket_not_found_except_on_seaweed(
    backend: Backend,
) -> None:
    if not backend.is_server:
        pytest.skip("MemoryStore has no buckets to be missing")
    store = backend.store_for(f"{backend.store.bucket}-missing")

    # SeaweedFS checks If-Match before the bucket and answers 412, so the
    # store can only report a failed condition; moto (and AWS) say NoSuchBucket.
    expected = ConditionFailedError if backend.name == "seaweed" else BucketNotFoundError
    with pytest.raises(expected):
        store.put("queue/a", b"{}", if_match='"0"')


# --- unordered (directory bucket) listings, as MemoryStore fakes them -------------


def test_given_express_memory_store_when_listed_then_same_keys_in_shuffled_order() -> None:
    store = MemoryStore("jobs--use1-az4--x-s3", ordered_listing=False, seed=7)
    keys = ulid_like_keys(20, seed=5)
    for key in keys:
        store.put(key, b"{}")

    listed = [item.key for item in store.list(PREFIX).items]

    assert store.ordered_listing is False
    assert sorted(listed) == sorted(keys)
    assert len(listed) == len(set(listed))
    assert listed != sorted(keys)  # seeded: this shuffle is fixed, and not the identity


def test_given_express_memory_store_when_paging_then_every_key_exactly_once() -> None:
    store = MemoryStore("jobs--use1-az4--x-s3", ordered_listing=False, seed=7)
    keys = ulid_like_keys(23, seed=6)
    for key in keys:
        store.put(key, b"{}")

    listed = list_all(store, PREFIX, max_keys=4)

    assert len(listed) == len(keys)
    assert set(listed) == set(keys)
