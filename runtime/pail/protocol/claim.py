"""Claiming a pending job in O(1) requests, whatever the backlog.

A claim never paginates the queue. The claimer lists one page of ``queue/``
(oldest first in a standard bucket) and keeps it; later claims walk that
page in order from where the last one stopped, so one listing serves many
claims. The walk starts at a random index among the first ``spread`` keys.
``spread`` adapts to contention: it is 1 for a worker alone, which then
claims strictly oldest first, and it doubles whenever the claimer meets a
job that another worker took (a miss), which also drops the page. Racing
workers thus start their walks at different places and each consumes its
own stretch of the page, instead of all fighting for the oldest job. It
halves again after a run of clean claims.

The steps of one claim (``docs/protocol.md`` has the crash analysis):

1. GET ``queue/{id}``: the payload and the ETag the claimer saw.
2. PUT ``run/{id}`` with ``If-None-Match: *``: the lease, carrying the payload.
   Exactly one worker wins it.
3. DELETE ``queue/{id}`` with ``If-Match`` on the ETag from step 1. This is
   what stops a worker acting on a stale view. If the entry changed, it is a
   newer entry whose own claim will run it. If it is gone, a delete that was
   sent once cannot have met its own earlier try: someone else took the
   entry (the job ended, or the reaper took it after fencing this lease), so
   the job is not ours. Only a *resent* delete may have been ours; step 4 and
   the proof below settle it.
4. HEAD ``done/{id}``, sent at the same time as step 3's DELETE (both follow
   the lease write, neither needs the other's answer; the claim waits for
   both before it goes on): an entry can outlive its job. A stalled worker's late
   retry can land after the job ended; so can a producer's create-only PUT
   whose response was lost and which botocore resent after a worker had
   claimed and finished the job (the resend finds the key free and creates
   it again). The simulation found both; this read closes them for one
   GET-class request per job. A dead marker of an earlier life than the
   entry's is the death a redrive took back, not an end: the redrive stopped
   half-way, and the claim clears it (``redrive.took_back``) and runs the job.
5. The proof of ownership, before the handler may start: if less than
   two-thirds of the lease surely remains (the claimer stalled, or its
   requests were slow), renew it with ``If-Match`` on the ETag of step 2.
   Success proves the lease is the current one and nobody else's (the
   reaper's fence rewrites it, a cancel deletes it, and every write is
   unique, so the ETag names our write alone), and leaves a whole lease to
   run on; a 412 means it was taken over: the job is not ours. A claim
   without a stall pays nothing for this.

**Sharded queues** (``Keys.sources``): each refill lists the next source
in turn (the flat layout, then shard 0, 1, ...; a random one first), so
racing workers spread over the shards and one LIST still serves many
claims. An empty page moves on to the next source within the same claim,
so a claim looks at every source before it returns None; but a *poll*
(``claim(polling=True)``, what ``Pail.work`` and ``pail work`` call) after
an empty one lists one source, so an idle worker's cost per poll is one
LIST, as with one shard, and it still looks at every shard within
``shards + 1`` polls (a job enqueued into an idle sharded queue waits up
to that many polls, not one). A drain that stops on an empty queue (the
Lambda worker, ``work_once``) claims without ``polling``: its "empty" has
looked everywhere. The flat layout of a sharded
queue (where jobs enqueued before it was sharded wait) is listed with a
delimiter, so the shards' keys nested under it do not fill its page. A
candidate's keys are those of the shard its key names: the lease,
the result and every later write of the job stay in its shard.
High-priority entries of a sharded queue wait in one place, the flat
layout's (``delay.PRIORITY``): a claim's first refill lists it at the same
time as its page (``overlap.both``), promotes what it finds and walks it
first, whatever shard it listed; at most once per ``PRIORITY_LOOK_EVERY``
per claimer, and never in an idle poll, so it costs no LIST per claim.

**Unordered listings** (directory buckets): a listing in no order has no
"first" keys for delayed and high-priority entries to sort into. There,
each refill of a source continues that source's listing where its last
refill stopped (from the top again after its end), and a page serves at
most ``UNORDERED_CLAIMS_PER_PAGE`` candidates. A claimer thus reads every
page of a source in turn: an entry due when its page is read is promoted
(up to ``delay.MAX_PROMOTIONS_PER_REFILL`` per page) and claimed first.
With ``B`` entries in a source of a queue of ``S`` sources, one claimer
reads it whole within ``S * ceil(B / page_size)`` refills, so within
``S * ceil(B / page_size) * UNORDERED_CLAIMS_PER_PAGE`` of its claims:
1,000 claims for 10,000 entries in one shard (``tests/unit/test_unordered_claims.py``).

A paused queue (``pail.protocol.pause``) claims nothing: a refill that
found candidates HEADs the pause marker, and if it exists drops the page
(``Claimer.paused`` says so). One HEAD per refill, none per claim.

A queue with concurrency limits (``pail.protocol.limits``): the limits are
read beside the pause check (at most once per ``gate.REFRESH`` seconds, no
request per claim), and a claim of a job under a limit holds its slots
between steps 1 and 2 (``Gate.admit``): a create-only PUT per slot, naming
the lease token step 2 writes. A claimer with no index of its own to try
lists the queue's slots before step 1 (``Gate.look``), so a full queue ends
its claim with no GET of an entry it cannot run. A group at its limit is passed by from its
entries' keys (a job's id names its group), a page of only such entries
makes the claim read the next page, and a full queue ends the claim with no
lease (``Claimer.limited``). A refill orders the page round-robin across
its groups (``limits.groups.fair_order``): fair sharing.

Step 1 of the next claim can be read ahead (``read_ahead``), while this
worker writes its current job's result: the candidate's GET then costs the
next claim no round trip. A read ahead can be stale by the time it is used;
step 3 is what catches a stale read (its ``If-Match`` on the ETag read), as
it catches a stale listing. One older than ``READ_AHEAD_FRESH`` is read again.

**A named candidate** (``Claimer.claim_key``): an S3 event names the entry
it announces (``queue/{id}``, ``queue/{s}/{id}`` in a sharded queue), so a
worker it woke can try that entry without listing: the same steps 1 to 5,
in the entry's own shard, after one HEAD of the pause marker once step 1
found the entry (none when it is gone: an entry already taken costs one
GET). A listing is only a source of candidates, and so is an event: a
stale one is caught by step 3 exactly as a stale page is. A delayed entry
(``queue/!{due}-{id}``) is promoted here only when it is high priority (due
at the epoch, so due by any clock); one with a real due time is left to a
listing, whose server time judges it (``Named.DUE``), or, while this
worker's clock says it is not due, to the worker the schedule or the
reaper's self-heal wakes later (``Named.WAITING``): no request either way.
A key that names no pending entry of this queue (another namespace, a
nested key, a console folder) is skipped with a log line and no request
(``Named.FOREIGN``).

Foreign bytes under ``queue/`` (an entry that is not a pending job pail can
run: not JSON, wrong types, too deep, or a payload with ``NaN`` as pailq
0.1.1 writes it) are quarantined on the claim's way: dead-lettered with
their raw bytes and the reason, under a lease like any dead-letter. That is
not a miss (nobody else took the job), so the claim goes on to the next
candidate without widening its spread; a worker behind any number of them
still reaches the good jobs. Keys that name no job (the console's zero-byte
"folders", nested keys) are passed by.
"""

from __future__ import annotations

import logging
import random
from enum import StrEnum
from typing import Literal

from pail.clock import Clock
from pail.codec import (
    DYING,
    META_OUTCOME,
    OUTCOME_SUCCEEDED,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    check_carried,
    raw_text,
)
from pail.errors import (
    ConditionFailedError,
    DecodeError,
    LeaseLostError,
    PailError,
    PayloadError,
    StorageError,
)
from pail.ids import new_token
from pail.keys import FLAT, QUEUE, Keys
from pail.protocol import cancel, delay, dependencies, redrive, transitions
from pail.protocol.lease import Lease
from pail.protocol.limits.gate import FULL_FOR, Gate, Refusal
from pail.protocol.limits.groups import fair_order, group_of
from pail.protocol.limits.slots import Held
from pail.protocol.overlap import SEQUENTIAL, Ahead, Overlap
from pail.protocol.pause import PauseCheck
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ListPage, ObjectInfo, PrefixLister, Store, StoredObject

log = logging.getLogger("pail")

DEFAULT_PAGE_SIZE = 1000
MAX_CANDIDATES_PER_CLAIM = 8
MAX_LISTS_PER_CLAIM = 3
CLEAN_CLAIMS_BEFORE_NARROWING = 16
STALE_AFTER_MISSES = 2
START_SHARE = 2 / 3
"""A handler starts only with this share of its lease surely ahead (the heartbeat's first
renewal comes a third of a lease later); a claim that took longer renews first (step 5)."""
PROOF_RENEWALS = 3

PRIORITY_LOOK_EVERY = 1.0
"""Seconds between one claimer's looks at a sharded queue's high-priority place: at most one
LIST a second per worker, never one per claim (a look that found entries looks again next time)."""

UNORDERED_CLAIMS_PER_PAGE = 100
"""Candidates one page serves in a store that lists in no order, before the next page is read."""

MAX_FOREIGN_PAGES = 10
MAX_PASSED_PAGES = 10
"""Pages of entries whose groups are at their limits one claim reads past (by LIST, no GET)."""
"""Pages of keys that name no job one refill reads past before it calls the queue empty."""
MAX_QUARANTINES_PER_CLAIM = 10_000
"""Foreign entries one claim may dead-letter on its way: each is gone after, so it ends."""
READ_AHEAD_FRESH = 5.0
"""Seconds a read ahead serves the next claim; an older one is read again. A stale one is
safe (step 3 catches it) but, if another worker took the job meanwhile, costs a lease write
and its removal where a fresh GET costs one 404. A loop claims again at once; a caller that
paused between ``work_once`` calls reads again."""

Skip = Literal["miss", "cleared", "passed", "limited"]
"""Why a candidate gave no lease."""
MISS: Skip = "miss"
"""The candidate was not ours: another worker took it, or it was not a job to run."""
CLEARED: Skip = "cleared"
"""The candidate was foreign bytes, now quarantined: progress, not contention."""
PASSED: Skip = "passed"
"""The candidate's group is at its concurrency limit: passed by (``pail.protocol.limits``)."""
LIMITED: Skip = "limited"
"""The queue is at its concurrency limit: the claim ends with no lease (``Claimer.limited``)."""


class Named(StrEnum):
    """What a claim of a named entry (``Claimer.claim_key``) found."""

    CLAIMED = "claimed"
    """The job is ours: a lease."""
    GONE = "gone"
    """No entry at that key (taken, ended or never there): one GET, nothing more."""
    TAKEN = "taken"
    """The entry was there, but another worker won it, or it had ended or was cancelled."""
    CLEARED = "cleared"
    """The entry held foreign bytes, now quarantined (dead-lettered raw)."""
    PAUSED = "paused"
    """The queue is paused: nothing was claimed."""
    LIMITED = "limited"
    """The queue or the entry's group is at its concurrency limit: nothing was claimed."""
    WAITING = "waiting"
    """A delayed entry not due by this worker's clock: no request."""
    DUE = "due"
    """A delayed entry due by this worker's clock: only a listing (the server's clock) promotes it."""
    FOREIGN = "foreign"
    """The key names no pending entry of this queue: skipped with a log line, no request."""


class Claimer:
    """Claims jobs for one worker. Not thread-safe: one per worker thread."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        *,
        visibility_timeout: float,
        clock: Clock,
        owner: str,
        stats: WriteStats | None = None,
        rng: random.Random | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        spread: int = 1,
        overlap: Overlap | None = None,
    ) -> None:
        self._store = store
        self._overlap = overlap or SEQUENTIAL
        self._ahead: tuple[str, float, Ahead[StoredObject | None]] | None = None
        self._keys = keys
        self._sources = keys.sources()
        self._rng = rng or random.Random()
        # No draw for one source: an unsharded claimer's random sequence is as it was.
        self._source = self._rng.randrange(len(self._sources)) if len(self._sources) > 1 else 0
        self._page_keys = self._sources[self._source]
        """The keys of the source the candidate being claimed came from (its shard's): the
        cached page's, or a named entry's while ``claim_key`` claims it."""
        self._tokens: dict[int, str | None] = {}
        """Where each source's listing continues, in a store that lists in no order."""
        self._walked = 0
        self._idle = False
        self._timeout = visibility_timeout
        self._clock = clock
        self._owner = owner
        self._stats = stats
        self._page_size = page_size
        self._spread = max(1, spread)
        self._clean = 0
        self._misses = 0
        self._cache: list[str] = []
        self._cursor = 0
        self._listed_at = 0.0
        self.lists = 0
        self._priority_looked_at: float | None = None
        """When this claimer last listed the high-priority place (None: look at the next claim)."""
        self._pause_check = PauseCheck(store, keys)
        self.paused = False
        """True when this claimer's last refill (or named claim) found the queue paused."""
        self.gate = Gate(store, keys, clock=clock, rng=self._rng, stats=stats, owner=owner)
        """The queue's concurrency limits as this claimer knows them (``pail.protocol.limits``)."""
        self.limited = False
        """True when the last claim found the queue at its concurrency limit (no job claimed)."""
        self._passed_token: str | None = None
        """Where the next refill lists from: the page after one whose groups were all at their limits."""
        self._next_token: str | None = None
        self._only_passed = False
        """True while every entry walked in the cached page was passed by for its group."""
        self.named: Named | None = None
        """What the last ``claim_key`` found."""

    def claim(self, *, polling: bool = False) -> Lease | None:
        """Claim one pending job, or return None if the queue looks empty.

        ``polling``: the caller claims again and again while the queue is
        empty (``Pail.work``). Then, in a sharded queue, a claim after one that
        found nothing lists one shard, not all of them (see the module docstring).
        """
        lease = self._claim(polling and self._idle)
        self._idle = lease is None
        return lease

    def limited_for(self) -> float | None:
        """If the last claim found the queue at a limit, the seconds it stays so (0: unknown), else None."""
        if not self.limited:
            return None
        return self.gate.full_for()

    def claim_key(self, key: str) -> Lease | None:
        """Claim the job whose pending entry is ``key`` (an S3 event named it), without listing.

        Returns the lease, or None; ``named`` then says what was found
        (``Named``). An entry that is gone costs one GET; one that is there
        costs a HEAD of the pause marker and the claim's own steps. The
        cached page and its walk are left as they were. See "A named
        candidate" in the module docstring.
        """
        self.limited = False
        self.gate.begin()
        source = self._keys.of_key(key, QUEUE)
        job_id = source.entry_id(key, QUEUE)
        if job_id is None:
            log.warning(
                "skipping %r: not a pending job's key of queue %r", key, self._keys.namespace
            )
            return self._found(Named.FOREIGN)
        parsed = delay.parse(source, key)
        if parsed is not None:
            due_ms, job_id = parsed
            if due_ms != delay.HIGH_DUE_MS:
                waiting = due_ms > self._clock.now().timestamp() * 1000
                return self._found(Named.WAITING if waiting else Named.DUE)
            promoted = delay.promote(self._store, source, key, job_id, stats=self._stats)
            if promoted is None:
                return self._found(Named.GONE)
            key = promoted
        pending = self._store.get(key)
        if pending is None:
            return self._found(Named.GONE)
        # The pause is honoured per named claim as per refill: one HEAD, once the entry
        # exists; the limits are read beside it, at most once per ``gate.REFRESH``.
        if self.gate.due():
            paused, refreshed = self._overlap.both(self._pause_check, self.gate.refresh)
            self.paused = paused.get()
            refreshed.get()
        else:
            self.paused = self._pause_check()
        if self.paused:
            return self._found(Named.PAUSED)
        if self.gate.active and (self.gate.queue_full() or self.gate.passes_by(job_id)):
            self.limited = True
            return self._found(Named.LIMITED)
        # The steps write in the candidate's shard, which they read from _page_keys.
        page_keys, self._page_keys = self._page_keys, source
        try:
            outcome = self._take(key, pending)
        finally:
            self._page_keys = page_keys
        if isinstance(outcome, Lease):
            self.named = Named.CLAIMED
            return outcome
        if outcome in (PASSED, LIMITED):
            self.limited = True
            return self._found(Named.LIMITED)
        return self._found(Named.CLEARED if outcome == CLEARED else Named.TAKEN)

    def _found(self, found: Named) -> Lease | None:
        """No lease: record what the named claim found instead."""
        self.named = found
        return None

    def _claim(self, idle: bool) -> Lease | None:
        lists = misses = cleared = passed_pages = 0
        self.limited = False
        self.gate.begin()
        if self.gate.active and self.gate.queue_full():
            self.limited = True  # known full a moment ago: no request (``gate.FULL_FOR``)
            return None
        # A claim looks at every source before it says the queue is empty,
        # except a poll after an empty one: an idle worker lists one source
        # per poll, so its cost per poll stays one LIST, however many shards.
        if len(self._sources) == 1:
            budget = MAX_LISTS_PER_CLAIM
        elif idle:
            budget = 1
        else:
            budget = MAX_LISTS_PER_CLAIM + len(self._sources) - 1
        # The first refill of a claim also lists the high-priority place of a
        # sharded queue (not an idle poll's: it stays one LIST).
        priority = self._keys.sharded and not idle and self._priority_look_due()
        while misses < MAX_CANDIDATES_PER_CLAIM and cleared < MAX_QUARANTINES_PER_CLAIM:
            if self._clock.monotonic() - self._listed_at > self._timeout:
                self.forget()  # an old page is mostly jobs others took since
            if not self._store.ordered_listing and self._walked >= UNORDERED_CLAIMS_PER_PAGE:
                self.forget()  # read the next page: see "Unordered listings" above
            if self._cursor >= len(self._cache):
                if self._cache and self._only_passed:
                    # Every entry of the page was of a group at its limit.
                    if self._next_token is None or passed_pages >= MAX_PASSED_PAGES:
                        # Nothing eligible: say so, and walk this page again (no
                        # request) while the groups' marks last, else list afresh.
                        self.limited = True
                        if self._clock.monotonic() - self._listed_at >= FULL_FOR:
                            self.forget()
                        else:
                            self._cursor = 0
                        return None
                    # Read on (by LIST: the ids name the groups), a bounded number of pages.
                    passed_pages += 1
                    self._passed_token = self._next_token
                    lists -= 1
                if lists >= budget:
                    return None
                if priority:
                    self._refill_with_priority()
                    priority = False
                else:
                    self._refill()
                lists += 1
                if self.paused:
                    return None  # the whole queue is paused: no other source either
                if not self._cache:
                    if len(self._sources) == 1:
                        return None
                    continue  # an empty shard: the next refill lists the next source
            key = self._cache[self._cursor]
            self._cursor += 1
            self._walked += 1
            outcome = self._try(key)
            if outcome == PASSED:
                continue
            self._only_passed = False
            if outcome == LIMITED:
                self._cursor -= 1  # not tried: the next claim starts here again
                self.limited = True
                return None
            if isinstance(outcome, Lease):
                self._clean, self._misses = self._clean + 1, 0
                if self._clean >= CLEAN_CLAIMS_BEFORE_NARROWING:
                    self._spread, self._clean = max(1, self._spread // 2), 0
                return outcome
            if outcome == CLEARED:
                cleared += 1
                lists = 0  # a page of foreign entries is progress: list again after it
                continue
            misses += 1
            self._missed()
        return None

    def _missed(self) -> None:
        """Someone else took the job we tried: we are racing, and our page is going stale.

        Widen the spread and jump to a random place in the page, where other
        walkers are less likely to be; after a second miss in a row, list again.
        """
        self._spread = min(self._spread * 2, self._page_size)
        self._clean = 0
        self._misses += 1
        if self._misses >= STALE_AFTER_MISSES:
            self._misses = 0
            self.forget()
        elif self._cursor < len(self._cache):
            self._cursor = self._rng.randrange(self._cursor, len(self._cache))

    @property
    def spread(self) -> int:
        """How many of the oldest keys a walk may start among (1 = strict FIFO)."""
        return self._spread

    def forget(self) -> None:
        """Drop the cached page, so the next claim lists afresh."""
        self._cache, self._cursor = [], 0

    def _priority_look_due(self) -> bool:
        looked = self._priority_looked_at
        return looked is None or self._clock.monotonic() - looked >= PRIORITY_LOOK_EVERY

    def _refill_with_priority(self) -> None:
        """A refill, and a listing of a sharded queue's high-priority place sent at the same time.

        The high-priority entries found are promoted and go first in the
        walk, whatever shard the refill listed.
        """
        filled, listed = self._overlap.both(
            self._refill, lambda: delay.list_priority(self._store, self._keys)
        )
        filled.get()
        page = listed.get()
        self.lists += 1
        # Entries found: more may be arriving, so the next claim looks again.
        self._priority_looked_at = None if page.items else self._clock.monotonic()
        promoted = (
            delay.promote_all(self._store, self._keys, page, stats=self._stats)
            if page.items
            else []
        )
        if promoted and not self.paused:
            if not self._cache:
                # The pause (and the limits) were not checked for an empty page:
                # these are candidates.
                self.paused = self._checked_pause()
                if not self.paused:
                    self._checked_limits()
            if not self.paused:
                self._cache[self._cursor : self._cursor] = promoted

    def _checked_limits(self) -> None:
        try:
            self.gate.refresh()
        except PailError:
            self.forget()  # a page whose limits could not be read must never be walked
            raise

    def _checked_pause(self) -> bool:
        try:
            return self._pause_check()
        except PailError:
            self.forget()  # a page whose pause check failed must never be walked
            raise

    def _refill(self) -> None:
        self._only_passed = True
        self._source = (self._source + 1) % len(self._sources)
        self._page_keys = self._sources[self._source]
        self._walked = 0
        start = None if self._store.ordered_listing else self._tokens.get(self._source)
        passed, self._passed_token = self._passed_token, None
        if passed is not None:
            start = passed
            self._source = (self._source - 1) % len(self._sources)  # the same source, read on
            self._page_keys = self._sources[self._source]
        try:
            token = self._list_into_cache(start)
        except StorageError:
            if start is None:
                raise
            # A continuation token the store no longer accepts: from the top.
            token = self._list_into_cache(None)
        # A page of keys that name no job (console folders, someone's nested
        # files) must not hide the jobs behind it: read on, a bounded number
        # of pages. Costs nothing while a page holds a job.
        for _ in range(MAX_FOREIGN_PAGES):
            if self._cache or token is None:
                break
            token = self._list_into_cache(token)
        if not self._store.ordered_listing:
            self._tokens[self._source] = token  # None: the next refill starts from the top
        self._next_token = token
        # A paused queue claims nothing: one HEAD per refill that found candidates.
        self.paused = bool(self._cache) and self._checked_pause()
        if self._cache and not self.paused:
            self._checked_limits()  # at most one GET per ``gate.REFRESH`` seconds
        if self.paused:
            self._cache = []
        self._cursor = self._rng.randrange(min(len(self._cache), self._spread) or 1)
        self._listed_at = self._clock.monotonic()

    def _list_into_cache(self, continuation: str | None) -> str | None:
        """List one page into the cache (the keys a claim may walk); the next page's token."""
        source = self._page_keys
        page = self._list(source, continuation)
        self.lists += 1
        self.gate.observe(page.server_time)  # the rate gate's clock: no request
        # Delayed entries sort first: promote the due ones, skip the rest (no
        # request at all when there are none).
        keys, extra_lists = delay.claimable_keys(
            self._store, source, page, page_size=self._page_size, stats=self._stats
        )
        self.lists += extra_lists
        named = {key: source.entry_id(key, QUEUE) for key in keys}
        self._cache = [key for key in keys if named[key] is not None]
        groups = {key: group_of(job_id) for key, job_id in named.items() if job_id is not None}
        if any(group is not None for group in groups.values()):
            # Fair sharing: the page's groups take turns (``limits.groups.fair_order``).
            self._cache = fair_order(self._cache, groups)
        return page.next_token

    def _list(self, source: Keys, continuation: str | None) -> ListPage:
        prefix = source.prefix(QUEUE)
        if len(self._sources) > 1 and source.pin == FLAT and isinstance(self._store, PrefixLister):
            # The flat layout of a sharded queue: its own keys, not the shards under it.
            found = self._store.list_prefixes(
                prefix, max_keys=self._page_size, continuation=continuation
            )
            return ListPage(found.keys, found.next_token, found.server_time)
        return self._store.list(prefix, max_keys=self._page_size, continuation=continuation)

    def read_ahead(self) -> None:
        """Start reading the candidate the next claim tries first; it is used if still fresh then.

        Called while the worker writes its job's result, so the next claim's
        step 1 has travelled by the time it starts. Costs nothing more: the
        next claim would read that key anyway. No page, or an old one: no read.
        """
        now = self._clock.monotonic()
        cache, cursor = self._cache, self._cursor
        if cursor >= len(cache) or now - self._listed_at > self._timeout:
            return
        key = cache[cursor]
        self._ahead = (key, now, self._overlap.ahead(lambda: self._store.get(key)))

    def _read(self, key: str) -> StoredObject | None:
        """Step 1: the entry, from a fresh enough read ahead of it or from a GET now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == key:
            started, pending = ahead[1], ahead[2]
            if self._clock.monotonic() - started <= READ_AHEAD_FRESH:
                try:
                    return pending.get()
                except PailError:
                    pass  # read it again below: a real failure shows there too
        return self._store.get(key)

    def _try(self, key: str) -> Lease | Skip:
        if self._keys.sharded:
            # The candidate's own shard: a promoted high-priority job's is the flat layout.
            self._page_keys = self._keys.of_key(key, QUEUE)
        if self.gate.active:
            if self.gate.passes_by(self._page_keys.job_id(key)):
                return PASSED
            if self.gate.look() is not None:  # the queue's slots are all held: no GET
                return LIMITED
        pending = self._read(key)
        if pending is None:
            return MISS
        return self._take(key, pending)

    def _take(self, key: str, pending: StoredObject) -> Lease | Skip:
        """Steps 2 to 5 for the entry ``pending`` read at ``key``, in ``_page_keys``' shard."""
        job_id = self._page_keys.job_id(key)
        try:
            envelope = Envelope.decode(pending.body)
            check_carried(envelope.payload)
            if job_id.startswith(delay.MARK):
                # A due delayed entry with foreign bytes (its promotion left it
                # here), or a '!' key pail never writes: not a job to run.
                raise DecodeError(
                    f"key {key!r} is not a pail key (a delayed entry is {delay.SHAPE})"
                )
        except (DecodeError, PayloadError) as exc:
            return self._quarantine(job_id, pending, exc)
        if envelope.cancelled:
            # A cancellation past its commit point: finish it, never run the job.
            cancel.finish_pending(
                self._store,
                self._page_keys,
                job_id,
                pending.etag,
                life=envelope.redriven,
                then=envelope.then,
                stats=self._stats,
            )
            return MISS
        record = LeaseRecord(
            job_id=job_id,
            payload=envelope.payload,
            attempt=envelope.attempts + 1,
            owner=self._owner,
            lease=new_token(),
            enqueued_at=envelope.enqueued_at,
            error=envelope.last_error,
            redriven=envelope.redriven,
            tags=envelope.tags,
            trace=envelope.trace,
            after=envelope.after,
            then=envelope.then,
        )
        try:
            body = record.encode()
        except PayloadError as exc:  # cannot happen after check_carried; never raise into a loop
            return self._quarantine(job_id, pending, exc)
        held: list[Held] = []
        if self.gate.active:
            # The slots first, naming the lease about to be written (``limits.slots``).
            admitted = self.gate.admit(job_id, record.lease, self._page_keys.run(job_id))
            if isinstance(admitted, Refusal):
                return LIMITED if admitted.group is None else PASSED
            held = admitted
        try:
            lease = self._lease(key, pending, envelope, job_id, record, body, held)
        except BaseException:
            self.gate.give_back(held)
            raise
        if lease is None:
            self.gate.give_back(held)
            return MISS
        return lease

    def _lease(
        self,
        key: str,
        pending: StoredObject,
        envelope: Envelope,
        job_id: str,
        record: LeaseRecord,
        body: bytes,
        held: list[Held],
    ) -> Lease | None:
        """Steps 2 to 5 once the slots (if any) are held; None if the job is not ours."""
        sent_at = self._clock.monotonic()
        won = put_conditional(
            self._store,
            self._page_keys.run(job_id),
            body,
            record.write,
            if_none_match=True,
            stats=self._stats,
            reason="claim",
        )
        if won is None:
            return None
        if held:
            proved = self.gate.prove(
                held, answered=self._clock.monotonic(), visibility_timeout=self._timeout
            )
            if proved is None:  # a recovery pass freed a slot while we stalled before the lease
                delete_if_unchanged(self._store, self._page_keys.run(job_id), won.etag)
                held.clear()
                return None
            held[:] = proved
        lease = Lease(
            self._store,
            self._page_keys,
            record,
            won.etag,
            sent_at=sent_at,
            visibility_timeout=self._timeout,
            clock=self._clock,
            stats=self._stats,
        )
        # Steps 3 and 4 at once; nothing goes on before both have answered.
        taken, done = self._overlap.both(
            lambda: self._take_pending(key, pending.etag),
            lambda: self._store.head(self._page_keys.done(job_id)),
        )
        if not taken.get() or self._ended(envelope, job_id, done.get()):
            if taken.get() and not self._tell_ended(record, done.get()):
                return None  # our lease stays beside done/: the reaper tells again, then drops it
            delete_if_unchanged(self._store, lease.key, lease.etag)
            return None
        if not self._proven(lease):
            return None  # taken over while we stalled: the lease is someone else's now
        lease.hold_slots(tuple(held))
        lease.slot_returned = self.gate.remember
        return lease

    def _take_pending(self, key: str, etag: str) -> bool:
        """Step 3: remove the pending entry we read. False if the job is not ours to run."""
        try:
            self._store.delete(key, if_match=etag)
            return True
        except ConditionFailedError as exc:
            # Changed: a newer entry, which its own claim runs. Gone, on a
            # delete sent once: someone else took it. Gone on a resent delete:
            # maybe our own first try; steps 4 and 5 decide.
            return exc.missing and exc.retried

    def _ended(self, envelope: Envelope, job_id: str, done: ObjectInfo | None) -> bool:
        """Step 4: True if this entry is stale because the job already ended (``done``: the HEAD).

        A dead marker of an earlier life than this entry's is not an end: its
        redrive stopped half-way (or a late write re-created it); it is
        cleared here, once step 3 made the entry ours, and the job runs.
        """
        took_back = redrive.took_back(self._store, self._page_keys, job_id, envelope.redriven, done)
        return done is not None and not took_back

    def _tell_ended(self, record: LeaseRecord, done: ObjectInfo | None) -> bool:
        """Tell the dependents this entry of an ended job carries how it ended; True once all heard.

        Whoever ends a job tells its dependents after writing the outcome; one
        that stops between the two (a cancel that marked a running job, then
        crashed) leaves the telling to the job's records that carry the edges.
        An entry its owner wrote after that end (a retry of the attempt the
        cancel cut off) is one: dropped here untold, it left the dependents
        waiting for ever (main-sweep seed 7103). No dependents: nothing to do,
        no request. False keeps our lease beside ``done/``, which the reaper
        finishes as any lease beside an outcome: it tells them again.
        """
        if not record.then or done is None:
            return True
        outcome = done.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
        return dependencies.told(
            self._store, self._page_keys, record.job_id, record.then, outcome, stats=self._stats
        )

    def _proven(self, lease: Lease) -> bool:
        """Step 5: make sure the lease is ours and has most of its life ahead; False if lost.

        The reaper takes a lease only once it expired, so while a third or
        less of it has passed since we sent its write, nobody can have fenced
        it: no request is needed. Otherwise a renewal (``If-Match``) proves it.
        """
        for _ in range(PROOF_RENEWALS):
            if lease.remaining() >= self._timeout * START_SHARE:
                return True
            try:
                lease.renew()
            except LeaseLostError:
                return False
        return lease.remaining() > 0

    def _quarantine(self, job_id: str, pending: StoredObject, exc: PailError) -> Skip:
        """Foreign bytes where a job should be: dead-letter them under a lease, raw, with the reason."""
        error = ErrorInfo.from_exception(exc)
        # The lease carries the bytes: if this claimer dies half-way, the
        # reaper that finishes the dead-letter keeps them.
        raw = raw_text(pending.body)
        record = LeaseRecord(
            job_id=job_id,
            payload=None,
            attempt=0,
            owner=self._owner,
            lease=new_token(),
            state=DYING,
            error=error,
            raw=raw,
        )
        won = put_conditional(
            self._store,
            self._page_keys.run(job_id),
            record.encode(),
            record.write,
            if_none_match=True,
            stats=self._stats,
            reason="claim",
        )
        if won is None:
            return MISS  # another claimer is quarantining it, or a lease of it lives
        log.warning("quarantining pending entry %s (not a job pail can run): %s", pending.key, exc)
        transitions.dead_letter(
            self._store,
            self._page_keys,
            record,
            won.etag,
            error=error,
            raw=raw,
            stats=self._stats,
        )
        delete_if_unchanged(self._store, pending.key, pending.etag)
        return CLEARED
