"""Paging through a listing: the one loop over ``Store.list`` pages, bounded or not.

Every reader that walks a prefix page by page (``stats``, ``depth``, the
operator tools, the delayed-job lookup, ``purge``) goes through ``pages``.
The claim and the reaper list by hand: a claim keeps one page as its cache,
and the reaper's walk resumes from a position kept in the bucket.
"""

from __future__ import annotations

from collections.abc import Iterator

from pail.store.base import ListPage, Store

MAX_KEYS = 1000
"""S3's largest page."""


def pages(
    store: Store,
    prefix: str,
    *,
    max_keys: int = MAX_KEYS,
    max_pages: int | None = None,
    start_after: str | None = None,
    by_key: bool = False,
) -> Iterator[ListPage]:
    """The pages of a listing of ``prefix``, in the server's order; at most ``max_pages`` (None: all).

    The first page starts after ``start_after``. Each next page continues
    where the last one stopped: with the continuation token, or, with
    ``by_key``, after the last key seen (for a caller that deletes as it
    reads: the next page does not depend on what was deleted). A store whose
    listing is not in key order (a directory bucket) takes continuation
    tokens only: there, ``start_after`` and ``by_key`` are ignored. The last
    page yielded has ``next_token`` None when the listing reached the end.

    >>> from pail.store import MemoryStore
    >>> store = MemoryStore("jobs")
    >>> for name in ("a", "b", "c"):
    ...     _ = store.put(f"queue/{name}", b"{}")
    >>> [[i.key for i in p.items] for p in pages(store, "queue/", max_keys=2)]
    [['queue/a', 'queue/b'], ['queue/c']]
    >>> [[i.key for i in p.items] for p in pages(store, "queue/", max_keys=1, max_pages=2, start_after="queue/a")]
    [['queue/b'], ['queue/c']]
    """
    ordered = store.ordered_listing
    after = start_after if ordered else None
    token: str | None = None
    count = 0
    while max_pages is None or count < max_pages:
        page = store.list(prefix, max_keys=max_keys, start_after=after, continuation=token)
        count += 1
        yield page
        if page.next_token is None:
            return
        if by_key and ordered and page.items:
            after, token = page.items[-1].key, None
        else:
            after, token = None, page.next_token
