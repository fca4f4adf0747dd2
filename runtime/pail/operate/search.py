"""Finding jobs: by tag, id prefix, state and enqueue time, a page at a time (``Pail.search``).

The plan, cheapest source first:

* **tags given**: the index's key range of the first tag (``pail.protocol.index``):
  ``ceil(m / 1000)`` LISTs for ``m`` jobs carrying it, whatever the queue holds;
* **else an id prefix, a time window or a state**: the key range of each state
  prefix that can hold such a job (``failed``: ``dlq/`` only; ``done``:
  ``done/``; ``pending``: ``queue/`` and ``run/`` (a retry waiting on its
  lease); ``running``: ``run/``; ``cancelled``: ``done/`` and ``queue/``),
  one per shard: ULIDs make a window a key range there too.

Each candidate id is then read as ``Pail.status`` reads it (a HEAD for a done
job, up to four requests for others) and kept if it matches every tag, the
state and the window; so the index is a hint and foreign keys are skipped.
A page reads at most ``max_reads`` candidates: a state that few candidates
match ends the page early, with ``more`` and the cursor to go on from.

Every page says what it cost (``SearchPage.requests``, by operation).
A delayed job that is not due yet is found by its tags or its id, not by a
window over ``queue/`` (its key is its due time, not its id).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

from pail.errors import ConfigurationError
from pail.ids import ulid_time
from pail.keys import DLQ, DONE, QUEUE, RUN, Keys
from pail.protocol.index import Window, candidates, entry_key, forget, tag_prefix
from pail.status import JobState, JobStatus, read_delayed_status, read_status
from pail.store.base import Store
from pail.store.counting import CountingStore
from pail.tags import Tags, validate

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
DEFAULT_MAX_READS = 500
READERS = 16
"""Candidates whose status is read at once (each read is one to four requests, in turn)."""
STALE_AFTER = timedelta(hours=1)
"""An index entry whose job is found nowhere is deleted once its id is this old: younger, its
producer may still be writing the job's entry (entries go first)."""

_PREFIXES: dict[JobState | None, tuple[str, ...]] = {
    None: (QUEUE, RUN, DONE, DLQ),
    JobState.PENDING: (QUEUE, RUN),
    JobState.RUNNING: (RUN,),
    JobState.DONE: (DONE,),
    JobState.FAILED: (DLQ,),
    JobState.CANCELLED: (DONE, QUEUE),
}


@dataclass(frozen=True, slots=True)
class Query:
    """What to look for; every part given must match (an empty query matches every job)."""

    tags: Tags = field(default_factory=dict)
    state: JobState | None = None
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str = ""

    @classmethod
    def checked(
        cls,
        *,
        tags: Mapping[str, str] | None = None,
        state: str | JobState | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        id_prefix: str | None = None,
    ) -> Query:
        """A query from a caller's arguments, or ``ConfigurationError`` saying what is wrong."""
        try:
            job_state = JobState(state) if state is not None else None
        except ValueError:
            raise ConfigurationError(
                f"unknown job state {state!r}: use one of {', '.join(JobState)}"
            ) from None
        for name, when in (("since", since), ("until", until)):
            if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
                raise ConfigurationError(f"{name} must be an aware datetime, got {when!r}")
        if since is not None and until is not None and until < since:
            raise ConfigurationError(f"until ({until.isoformat()}) is before since")
        prefix = id_prefix or ""
        if not isinstance(prefix, str) or "/" in prefix or len(prefix) > 512:
            raise ConfigurationError(f"invalid id prefix {prefix!r}: one key segment, no '/'")
        return cls(validate(tags), job_state, since, until, prefix)

    @property
    def window(self) -> Window:
        return Window(self.since, self.until)

    def matches(self, status: JobStatus) -> bool:
        """True if a job's status satisfies every part of the query."""
        if self.state is not None and status.state is not self.state:
            return False
        if not status.id.startswith(self.id_prefix) or not self.window.holds(status.id):
            return False
        return all(status.tags.get(key) == value for key, value in self.tags.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "tags": self.tags,
            "state": self.state.value if self.state else None,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "id_prefix": self.id_prefix or None,
        }


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of matches, oldest id first; ``next_after`` goes on where it stopped."""

    query: Query
    jobs: tuple[JobStatus, ...]
    more: bool
    next_after: str | None
    plan: str
    """Where the candidates came from: ``index`` (a tag's key range) or ``listing`` (state prefixes)."""
    requests: Mapping[str, int]
    """What this page cost, by S3 operation (ListObjectsV2, HeadObject, GetObject, DeleteObject)."""
    candidates: int
    """Candidate ids read."""

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query.to_json(),
            "jobs": [job.to_json() for job in self.jobs],
            "more": self.more,
            "next_after": self.next_after,
            "plan": self.plan,
            "requests": dict(self.requests),
            "candidates": self.candidates,
        }


def _deduped(ids: Iterator[str]) -> Iterator[str]:
    last = None
    for job_id in ids:
        if job_id != last:
            yield job_id
        last = job_id


def search(
    store: Store,
    keys: Keys,
    query: Query,
    *,
    limit: int = DEFAULT_LIMIT,
    after: str | None = None,
    max_reads: int = DEFAULT_MAX_READS,
    now: datetime | None = None,
) -> SearchPage:
    """Up to ``limit`` jobs matching ``query`` whose id sorts after ``after``; see the module docstring.

    >>> from pail import Pail, MemoryStore
    >>> queue = Pail(MemoryStore("jobs"))
    >>> acme = queue.enqueue({"n": 1}, tags={"customer": "acme"})
    >>> _ = queue.enqueue({"n": 2}, tags={"customer": "globex"})
    >>> page = search(queue.store, queue.keys, Query.checked(tags={"customer": "acme"}))
    >>> [job.id == acme for job in page.jobs], page.plan, page.requests["ListObjectsV2"]
    ([True], 'index', 1)
    """
    counted = CountingStore(store)
    now = now or datetime.now(UTC)
    plan = "index" if query.tags else "listing"
    index_prefix: str | None = None
    if after is not None and not after.startswith(query.id_prefix) and after > query.id_prefix:
        ids: Iterator[str] = iter(())  # the cursor is past every id with the prefix
    elif query.tags:
        key, value = next(iter(query.tags.items()))
        index_prefix = tag_prefix(keys, key, value)
        ids = _under(counted, index_prefix, query, after)
    else:
        streams = [
            _under(counted, source.prefix(state), query, after)
            for source in keys.sources()
            for state in _PREFIXES[query.state]
        ]
        ids = _deduped(heapq.merge(*streams))

    def resolve(job_id: str) -> JobStatus | None:
        status = read_status(counted, keys, job_id)
        if status is None and index_prefix is not None:
            status = read_delayed_status(counted, keys, job_id)
            if status is None:
                _forget_if_stale(counted, f"{index_prefix}{job_id}", job_id, now)
        if status is not None and index_prefix is not None and not status.tags:
            status = _tags_from_index(counted, keys, query, status)
        return status if status is not None and query.matches(status) else None

    found: list[JobStatus] = []
    read = 0
    last: str | None = None
    more = False
    # Candidates are read READERS at a time, never more than the page can still use.
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        while True:
            room = min(limit - len(found), max_reads - read)
            if room <= 0:
                more = next(ids, None) is not None
                break
            batch = list(islice(ids, room))
            if not batch:
                break
            for job_id, status in zip(batch, pool.map(resolve, batch), strict=True):
                read, last = read + 1, job_id
                if status is not None:
                    found.append(status)
    return SearchPage(
        query,
        tuple(found),
        more,
        last if more else None,
        plan,
        dict(counted.requests),
        read,
    )


def _under(store: Store, prefix: str, query: Query, after: str | None) -> Iterator[str]:
    """The candidate ids under ``prefix`` (a state's or a tag's): the query's id prefix and window."""
    return candidates(store, prefix, query.window, after=after, id_prefix=query.id_prefix)


def _tags_from_index(store: Store, keys: Keys, query: Query, status: JobStatus) -> JobStatus:
    """A job whose objects carry no tags, with those of the query its index entries vouch for.

    A job's tags live in its entry, lease and dead letter, and in ``done/``'s
    metadata when pail's worker wrote it; a cancellation, or a pailq 0.1.1
    worker, leaves none there. The index then answers: the first tag's entry
    named the job, and a HEAD of each other tag's entry tells the rest.
    """
    vouched: dict[str, str] = {}
    for n, (key, value) in enumerate(query.tags.items()):
        if n == 0 or store.head(entry_key(keys, key, value, status.id)) is not None:
            vouched[key] = value
    return replace(status, tags=vouched)


def _forget_if_stale(store: Store, key: str, job_id: str, now: datetime) -> None:
    born = ulid_time(job_id)
    if born is not None and now - born > STALE_AFTER:
        forget(store, key)
