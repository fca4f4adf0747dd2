"""The delimited listing (``PrefixLister.list_prefixes``) on every backend.

Operator tools find the queues in a bucket with it: the folders directly
under a prefix, one entry per folder however many keys it holds.
"""

from __future__ import annotations

from pail.store.base import PrefixLister, Store


def _fill(store: Store, keys: list[str]) -> None:
    for key in keys:
        store.put(key, b"{}")


def test_given_keys_in_folders_when_list_prefixes_then_each_folder_once_and_loose_keys_apart(
    store: Store,
) -> None:
    assert isinstance(store, PrefixLister)
    _fill(store, ["queue/a", "queue/b", "run/c", "reports/queue/d", "loose.txt"])

    page = store.list_prefixes("")

    assert sorted(page.prefixes) == ["queue/", "reports/", "run/"]
    assert [info.key for info in page.keys] == ["loose.txt"]
    assert page.next_token is None


def test_given_a_nested_prefix_when_list_prefixes_then_only_the_folders_under_it(
    store: Store,
) -> None:
    assert isinstance(store, PrefixLister)
    _fill(store, ["reports/queue/a", "reports/done/b", "reports/done/c", "other/queue/d"])

    page = store.list_prefixes("reports/")

    assert sorted(page.prefixes) == ["reports/done/", "reports/queue/"]
    assert page.keys == ()


def test_given_more_folders_than_a_page_when_list_prefixes_then_pages_cover_them_once(
    store: Store,
) -> None:
    assert isinstance(store, PrefixLister)
    _fill(store, [f"ns{n}/queue/x" for n in range(5)])

    seen: list[str] = []
    token: str | None = None
    for _ in range(10):
        page = store.list_prefixes("", max_keys=2, continuation=token)
        seen += page.prefixes
        token = page.next_token
        if token is None:
            break

    assert sorted(seen) == [f"ns{n}/" for n in range(5)]
