"""The bounded read (``BoundedGetter.get_bounded``) on every backend.

The dashboard reads objects a foreign writer may have made huge: the size
must come from the GET's own headers, and a body over the bound must not be
read.
"""

from __future__ import annotations

import pytest

from pail.errors import ObjectTooLargeError
from pail.store.base import BoundedGetter, Store


def test_given_objects_around_the_bound_when_get_bounded_then_small_ones_read_large_ones_refused(
    store: Store,
) -> None:
    assert isinstance(store, BoundedGetter)
    at = store.put("dlq/at", b"x" * 1024, metadata={"pail-outcome": "dead"})
    store.put("dlq/over", b"y" * 1025)
    store.put("dlq/empty", b"")

    read = store.get_bounded("dlq/at", 1024)
    with pytest.raises(ObjectTooLargeError) as refused:
        store.get_bounded("dlq/over", 1024)
    empty = store.get_bounded("dlq/empty", 1024)

    assert read is not None and read.body == b"x" * 1024 and read.etag == at.etag
    assert refused.value.size == 1025 and refused.value.limit == 1024
    assert refused.value.etag == store.head("dlq/over").etag  # type: ignore[union-attr]
    assert empty is not None and empty.body == b""
    assert store.get_bounded("dlq/missing", 1024) is None
    assert store.get("dlq/at") == read  # the store still serves whole reads after a refusal
