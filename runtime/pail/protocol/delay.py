"""Delayed and high-priority jobs: pending entries that are not claimable before their time.

A delayed job's entry is ``queue/!{due}-{id}``: ``due`` is the epoch time in
milliseconds, 13 digits, so these keys sort by due time and *before* every
job id (``!`` sorts before digits and letters). The claim's one listing of
``queue/`` therefore shows them first, with their due time in the key:

- no delayed job waiting: the listing is exactly what it was; nothing extra;
- a due entry is **promoted** to ``queue/{id}`` (GET it, PUT ``queue/{id}``
  create-only, DELETE it ``If-Match``) and claimed like any other job;
- waiting entries are skipped by reading their key, at no request. If the
  page is all waiting entries, one more LIST starts after them.

Due time is judged by the server's clock: the ``Date`` of that listing. An
absolute ``not_before`` is written into the key as given, even if the
producer's clock says it has passed, so only the server's clock decides when
it is due (a producer whose clock runs fast cannot make it claimable early).
A relative ``delay`` counts from the producer's clock: a producer sees no
server time before its write (one granted only ``PutObject`` can read
nothing), so a producer clock off by a minute shifts a delayed job's due time
by that minute.

Promotion is crash-safe: a crash after the PUT leaves both entries, and the
next promotion's create-only PUT finds the job pending (412) or taken; an
entry re-created after its job was claimed is a first attempt, and every
claim checks ``done/{id}`` (and a lease blocks its claim), so a job never
runs again for it. ``docs/protocol.md`` ("Delayed jobs") has the table.

A **high-priority** job is a delayed job due at the epoch: its entry
``queue/!0000000000000-{id}`` sorts before every other pending key, so the
next refill of any worker's page promotes it and puts it first in that
worker's walk. A normal job costs nothing more; a high one costs the
promotion (3 requests). Its retries are normal jobs ("Priorities").

In a **sharded** queue a claimer's refill lists one shard, so a high entry
in its job's shard would wait for the claimers' rotations to reach it.
There, every high entry waits in one place instead, the flat layout's
``queue/!0000000000000-{id}`` (``PRIORITY``), and is promoted beside itself
to ``queue/{id}``: the job lives in the flat layout, where every reader of
one job looks (``Keys.layouts``). The first refill of each claim lists that
place too (``list_priority``), beside its own page and at the same time, so
whatever shard a claimer is at, its next refill sees every high job.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from pail.bounds import validate_delay, validate_due
from pail.codec import Envelope
from pail.errors import ConfigurationError, DecodeError, PayloadError
from pail.ids import new_token
from pail.keys import FLAT, QUEUE, Keys
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ListPage, ObjectInfo, Store
from pail.store.listing import pages

log = logging.getLogger("pail")

MARK = "!"
WIDTH = 13
SHAPE = f"queue/{MARK}{{13-digit due time in ms}}-{{job id}}"
"""How a delayed entry's key reads, for error messages."""
AFTER_DELAYED = MARK + "~"
"""Sorts after every delayed key and before every job id: where a listing skips them."""
MAX_PROMOTIONS_PER_REFILL = 16
"""Bounded, so one refill never does unbounded work; the rest wait for the next refill."""
MAX_LOOKUP_PAGES = 10


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest due time a key can hold (13 digits of milliseconds since it)."""
HIGH_DUE = EPOCH
"""The due time of a high-priority entry: always due, and before any real due time."""
HIGH_DUE_MS = 0
"""``HIGH_DUE`` as a key spells it (milliseconds since the epoch): due by any clock."""
PRIORITY = f"{MARK}{HIGH_DUE_MS:0{WIDTH}d}-"
"""How every high-priority entry's name starts: the place a sharded queue's claimers list first."""


class Priority(StrEnum):
    """The two classes of job."""

    HIGH = "high"
    NORMAL = "normal"


def parse_priority(value: str | Priority) -> Priority:
    """``value`` as a ``Priority``, or ``ConfigurationError``.

    >>> parse_priority("high")
    <Priority.HIGH: 'high'>
    """
    try:
        return Priority(value)
    except ValueError:
        choices = ", ".join(p.value for p in Priority)
        raise ConfigurationError(f"priority must be one of {choices}, got {value!r}") from None


def due_for(priority: str | Priority, due: datetime | None) -> datetime | None:
    """The due time of an entry with ``priority``: high jumps ahead unless it is delayed.

    >>> due_for("high", None) == HIGH_DUE, due_for("normal", None)
    (True, None)
    """
    if parse_priority(priority) is Priority.HIGH and due is None:
        return HIGH_DUE
    return due


def due_time(
    delay: float | timedelta | None, not_before: datetime | None, *, now: datetime
) -> datetime | None:
    """When a job enqueued ``now`` (the producer's wall clock, ``Clock.now``) is claimable; None: at once.

    ``delay`` counts from ``now``. ``not_before`` is returned as given, whatever
    ``now`` says: the server's clock judges it at claim time.

    >>> now = datetime(2026, 1, 1, tzinfo=UTC)
    >>> due_time(90, None, now=now).isoformat()
    '2026-01-01T00:01:30+00:00'
    >>> due_time(None, datetime(2025, 12, 31, tzinfo=UTC), now=now).isoformat()
    '2025-12-31T00:00:00+00:00'
    >>> due_time(None, None, now=now) is None
    True
    """
    if delay is not None and not_before is not None:
        raise ConfigurationError("give delay or not_before, not both")
    if delay is not None:
        seconds = validate_delay(delay)
        if seconds == 0:
            return None
        return validate_due(now + timedelta(seconds=seconds), "now + delay")
    if not_before is not None:
        validate_due(not_before)
        # Never compared with the producer's clock: a fast one would make a
        # future time look past and the job claimable early.
        return max(not_before, EPOCH)
    return None


def delayed_key(keys: Keys, due: datetime, job_id: str) -> str:
    """The entry of a job due at ``due``.

    >>> delayed_key(Keys(), datetime(2026, 1, 1, tzinfo=UTC), "01J0000000000000000000000A")
    'queue/!1767225600000-01J0000000000000000000000A'
    """
    millis = int(due.timestamp() * 1000)
    if millis == HIGH_DUE_MS and keys.sharded:
        # One place for every shard's claimers to look at: the flat layout's.
        return f"{keys.pinned(FLAT).prefix(QUEUE)}{PRIORITY}{job_id}"
    return f"{keys.job_prefix(QUEUE, job_id)}{MARK}{millis:0{WIDTH}d}-{job_id}"


def list_priority(store: Store, keys: Keys) -> ListPage:
    """One listing of a sharded queue's high-priority entries (at most ``MAX_PROMOTIONS_PER_REFILL``).

    Usually empty: a LIST that names no key. Its due entries are promoted
    with ``promote_all``.
    """
    flat = keys.pinned(FLAT)
    return store.list(flat.prefix(QUEUE) + PRIORITY, max_keys=MAX_PROMOTIONS_PER_REFILL)


def promote_all(
    store: Store, keys: Keys, page: ListPage, *, stats: WriteStats | None = None
) -> list[str]:
    """Promote the high-priority entries of ``page`` (``list_priority``'s); the keys to claim first."""
    flat = keys.pinned(FLAT)
    promoted: list[str] = []
    for item in page.items:
        parsed = parse(flat, item.key)
        if parsed is None or parsed[0] != HIGH_DUE_MS:
            continue
        key = promote(store, flat, item.key, parsed[1], stats=stats)
        if key is not None:
            promoted.append(key)
    return promoted


def parse(keys: Keys, key: str) -> tuple[int, str] | None:
    """``(due_ms, job_id)`` of a delayed entry's key, or None for any other key."""
    parts = keys.split(key, QUEUE)
    rest = parts[1] if parts is not None else key
    if not rest.startswith(MARK):
        return None
    millis, _, job_id = rest[1:].partition("-")
    if len(millis) != WIDTH or not millis.isdigit() or not job_id or "/" in job_id:
        return None
    if not millis.isascii():
        return None  # isdigit() also says yes to other scripts' digits
    return int(millis), job_id


def claimable_keys(
    store: Store,
    keys: Keys,
    page: ListPage,
    *,
    page_size: int,
    stats: WriteStats | None = None,
) -> tuple[list[str], int]:
    """The keys a claimer may walk from one listing of ``queue/``, and the extra LISTs made.

    Promotes the due delayed entries on the page (their promoted keys come
    first), skips the waiting ones, and lists past them if they filled the page.
    """
    delayed = [(item, parse(keys, item.key)) for item in page.items]
    if all(parsed is None for _, parsed in delayed):
        return [item.key for item in page.items], 0
    now_ms = page.server_time.timestamp() * 1000
    promoted: list[str] = []
    normal: list[str] = []
    for item, parsed in delayed:
        if parsed is None:
            normal.append(item.key)
        elif parsed[0] <= now_ms and len(promoted) < MAX_PROMOTIONS_PER_REFILL:
            key = promote(store, keys, item.key, parsed[1], stats=stats)
            if key is not None:
                promoted.append(key)
    lists = 0
    if not normal and len(page.items) >= page_size and store.ordered_listing:
        rest = store.list(
            keys.prefix(QUEUE), max_keys=page_size, start_after=keys.prefix(QUEUE) + AFTER_DELAYED
        )
        lists = 1
        normal = [item.key for item in rest.items if parse(keys, item.key) is None]
    return promoted + normal, lists


def promote(
    store: Store, keys: Keys, key: str, job_id: str, *, stats: WriteStats | None = None
) -> str | None:
    """Move the due delayed entry ``key`` to ``queue/{id}``; the new key, or None if it was gone.

    Foreign bytes are not moved: the delayed entry's own key comes back, and
    the claim quarantines them where they are (a copy would write the same
    bytes again at every promotion, and every pail write is unique).
    """
    entry = store.get(key)
    if entry is None:
        return None  # promoted or cancelled by someone else meanwhile
    try:
        # A fresh write token: the promoted entry's bytes (and ETag) are its own.
        fresh = replace(Envelope.decode(entry.body), write=new_token())
        body, token = fresh.encode(), fresh.write
    except (DecodeError, PayloadError):
        return key
    target = keys.queue(job_id)
    put_conditional(store, target, body, token, if_none_match=True, stats=stats, reason="promote")
    # 412 above: the job is pending already (an earlier promotion that died
    # before this delete) or was taken; either way this entry has done its work.
    delete_if_unchanged(store, key, entry.etag)
    return target


def find(store: Store, keys: Keys, job_id: str) -> ObjectInfo | None:
    """The delayed entry of ``job_id``, by listing the delayed keys (a bounded number of pages).

    In a sharded queue, the delayed keys of each shard the job may live in
    (``Keys.layouts``), most likely first.
    """
    suffix = f"-{job_id}"
    for layout in keys.layouts(job_id):
        prefix = layout.job_prefix(QUEUE, job_id) + MARK
        page: ListPage | None = None
        for page in pages(store, prefix, max_pages=MAX_LOOKUP_PAGES):
            for item in page.items:
                if item.key.endswith(suffix):
                    return item
        if page is not None and page.next_token is not None:
            log.warning(
                "job %s: not found among the first %d pages of delayed jobs",
                job_id,
                MAX_LOOKUP_PAGES,
            )
    return None
