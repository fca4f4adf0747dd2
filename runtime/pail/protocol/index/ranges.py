"""A time window as a key range: the job ids under one prefix enqueued between two times.

A ULID's first 10 characters are its creation time in milliseconds, in an
alphabet whose byte order is numeric order. So the ids of a window are the
keys after ``prefix + time(since)`` and up to ``prefix + time(until)``: a
listing starts there (``StartAfter``) and stops at the first key past the end,
whatever the prefix holds before or after. An id that is not a ULID (a
caller's own, ``enqueue_many(ids=...)``) has no time, so no window holds it.

A directory bucket lists in no order and takes no ``StartAfter``: there, the
whole prefix is listed and the window applied to each key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from pail.ids import is_ulid
from pail.keys import MAX_ID_LENGTH
from pail.store.base import Store
from pail.store.listing import MAX_KEYS, pages

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TIME_CHARS = 10
_MAX_MS = 2**48 - 1


def time_prefix(when: datetime) -> str:
    """The first 10 characters of every ULID made in ``when``'s millisecond.

    >>> from datetime import UTC, datetime
    >>> time_prefix(datetime(1970, 1, 1, tzinfo=UTC)), time_prefix(datetime(2026, 1, 1, tzinfo=UTC))
    ('0000000000', '01KDXJ3F00')
    """
    ms = min(max(0, int(when.timestamp() * 1000)), _MAX_MS)
    chars = []
    for _ in range(_TIME_CHARS):
        ms, digit = divmod(ms, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


@dataclass(frozen=True, slots=True)
class Window:
    """Enqueued at or after ``since`` and at or before ``until`` (either may be open)."""

    since: datetime | None = None
    until: datetime | None = None

    @property
    def open(self) -> bool:
        """True when the window holds every id, ULID or not."""
        return self.since is None and self.until is None

    def holds(self, job_id: str) -> bool:
        """True if ``job_id`` was made inside the window (never for a non-ULID id in a closed window).

        >>> from datetime import UTC, datetime
        >>> Window(since=datetime(2026, 1, 1, tzinfo=UTC)).holds("01KDXJ3F00AAAAAAAAAAAAAAAA")
        True
        """
        if self.open:
            return True
        if not is_ulid(job_id):
            return False
        stamp = job_id[:_TIME_CHARS]
        if self.since is not None and stamp < time_prefix(self.since):
            return False
        return self.until is None or stamp <= time_prefix(self.until)

    def past(self, job_id: str) -> bool:
        """True if ``job_id`` sorts after every id of the window (an ordered listing may stop)."""
        return self.until is not None and job_id[:_TIME_CHARS] > time_prefix(self.until)

    def start_after(self, prefix: str, after: str | None) -> str | None:
        """Where a listing of ``prefix`` starts: after the cursor ``after`` or the window's start."""
        starts = [f"{prefix}{after}"] if after else []
        if self.since is not None:
            # Shorter than any id of that millisecond, so it sorts before all of them.
            starts.append(f"{prefix}{time_prefix(self.since)}")
        return max(starts) if starts else None


def candidates(
    store: Store,
    prefix: str,
    window: Window,
    *,
    after: str | None = None,
    id_prefix: str = "",
    page_size: int = MAX_KEYS,
) -> Iterator[str]:
    """The job ids under ``prefix`` inside ``window``, after the id ``after``, in id order.

    With ``id_prefix``, only the ids that start with it (the listing's own prefix).

    Lazily, a page at a time: a caller that stops early lists no further. A key
    that is not ``prefix`` plus one id segment (a folder marker, a nested
    key, another writer's object) is skipped.
    """
    ordered = store.ordered_listing
    start = window.start_after(prefix, after)
    found: list[str] = []
    for page in pages(store, f"{prefix}{id_prefix}", max_keys=page_size, start_after=start):
        for info in page.items:
            job_id = info.key[len(prefix) :]
            if not job_id or "/" in job_id or len(job_id) > MAX_ID_LENGTH:
                continue
            if ordered and window.past(job_id):
                return
            if not window.holds(job_id) or (after is not None and job_id <= after):
                continue
            if ordered:
                yield job_id
            else:
                found.append(job_id)
    yield from sorted(found)
