"""``pail.store.counting.CountingStore``: one count per request forwarded, named as S3 names it."""

from __future__ import annotations

from collections import Counter

import pytest

from pail.errors import ObjectTooLargeError
from pail.store.counting import CountingStore
from pail.store.memory import MemoryStore
from tests.support.plain_store import PlainStore


def test_given_each_kind_of_call_when_forwarded_then_each_counts_once_under_its_s3_name() -> None:
    seen: list[tuple[str, str]] = []
    store = CountingStore(MemoryStore("jobs"), on_request=lambda op, key: seen.append((op, key)))

    store.put("queue/a", b"{}")
    store.get("queue/a")
    store.get_bounded("queue/a", 10)
    store.head("queue/a")
    store.list("queue/")
    store.list_prefixes("")
    store.presign_get("queue/a", 60)
    store.delete("queue/a")

    assert store.requests == Counter(
        {"PutObject": 1, "GetObject": 2, "HeadObject": 1, "ListObjectsV2": 2, "DeleteObject": 1}
    )
    assert store.total() == 7  # a presigned URL is signed here: no request
    assert seen[0] == ("PutObject", "queue/a") and seen[4] == ("ListObjectsV2", "queue/")
    assert store.get("queue/a") is None


def test_given_a_store_without_bounded_gets_when_a_bounded_get_then_a_head_comes_first() -> None:
    inner = MemoryStore("jobs")
    inner.put("big", b"x" * 11)
    inner.put("small", b"x" * 10)
    store = CountingStore(PlainStore(inner))

    small = store.get_bounded("small", 10)
    with pytest.raises(ObjectTooLargeError):
        store.get_bounded("big", 10)

    assert small is not None and small.body == b"x" * 10
    assert store.requests == Counter({"HeadObject": 2, "GetObject": 1})  # no body read of "big"
    with pytest.raises(NotImplementedError):
        store.list_prefixes("")
    assert store.total() == 3
