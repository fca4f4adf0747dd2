"""The claimer's side of the limits: a slot for each limit a job is under, before its lease.

One ``Gate`` per claimer (not thread-safe, like the claimer). It reads the
queue's limits (``config.read``) at the claimer's refills, at most once per
``REFRESH`` seconds (``ABSENT_REFRESH`` while it knows of no limit at all);
while they set no concurrency limit it makes no other request (``concurrent``
is False and the claimer never calls ``admit``).

``admit`` holds, for one candidate, its group's slot (if its group has a
limit) and then the queue's (if the queue has one). Which index to try: the
one this claimer held last in that scope (it gave it back when its job
ended, so it is most likely still free: no LIST, one PUT per slot per job);
else one a LIST of the scope showed free. A scope found full (a lost PUT,
then a LIST with no free index below the limit) is **full** for
``FULL_FOR`` seconds: the claimer passes that group's entries by with no
request (a group's id names it, ``groups``), or returns from the claim at
once when the queue is full (``Claimer.limited``). After that time, the
next try LISTs before it writes, so a claimer blocked by a full queue costs
one LIST per poll and no failed write.

Where a rate gate plugs in: ``admit`` is the one place a job gets
permission to start; a rate limit asks there too (after the slots, before
the lease), and ``Refusal`` says which scope refused and until when.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import datetime

from pail.clock import Clock
from pail.errors import AccessDeniedError, PailError
from pail.keys import Keys
from pail.protocol.limits import config, slots
from pail.protocol.limits.config import Limits
from pail.protocol.limits.groups import group_of
from pail.protocol.limits.rate import NO_RATES, QUEUE_SCOPE, RateGate, RateLimits
from pail.protocol.limits.slots import Held, SlotRecord
from pail.protocol.writes import WriteStats
from pail.store.base import Store

log = logging.getLogger("pail")

REFRESH = 5.0
"""Seconds a claimer uses the limits it read before it reads them again (at a refill)."""
ABSENT_REFRESH = 30.0
"""Seconds a claimer that read no limit at all (no limits object: a 404) waits before it reads
again: a queue without limits pays one GET per claimer per 30 s, not per 5 s, and a first
limit set on it is honoured within 30 s of each claimer's next refill (a change of a limit
it knows, within ``REFRESH``)."""
FULL_FOR = 1.0
"""Seconds a claimer treats a scope it found full as full, with no request."""
READS = True
"""False: no gate reads the limits, so none is honoured. Only the simulation sets it, for the
run of a world that has no limits: its seeds then make the requests they made before limits
existed (the pinned seeds of ``tests/simulation/regressions.py`` stay what they pin)."""
HINT_FOR = 2.0
"""Seconds the index a claimer gave back stays the one it tries first, with no LIST."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``admit`` gave no slot: the scope that is full (None: the queue's; else a group).

    ``wait``: seconds until that scope may admit again, when known (a rate
    limit's full window ends then); 0 when it is not known.
    """

    group: str | None
    wait: float = 0.0


class Gate:
    """A claimer's view of the queue's limits and the slots it holds. One per claimer."""

    def __init__(
        self,
        store: Store,
        keys: Keys,
        *,
        clock: Clock,
        rng: random.Random,
        stats: WriteStats | None = None,
        refresh: float = REFRESH,
        owner: str = "",
    ) -> None:
        self._store = store
        self._keys = keys
        self._clock = clock
        self._rng = rng
        self._stats = stats
        self._refresh = refresh
        self._absent_refresh = max(refresh, ABSENT_REFRESH)
        self._read_at: float | None = None
        self.limits: Limits = config.NONE
        self._full: dict[str | None, float] = {}
        """Scopes found full (None: the queue's), with when their mark ends (monotonic)."""
        self._hints: dict[str | None, tuple[int, float]] = {}
        """The index given back last in each scope, and when."""
        self._looked: set[int] | None = None
        """The queue's held indices as this claim's ``look`` listed them (None: not looked)."""
        self._denied_logged = False
        self.reads = 0
        self.rates: RateLimits = NO_RATES
        """The queue's rate limits (``limits.rate``), from the same object, read at the same time."""
        self.rate = RateGate(store, keys, clock=clock, owner=owner, rng=rng, stats=stats)
        self._rate_reason_logged = False

    @property
    def concurrent(self) -> bool:
        """True if the last limits read set a concurrency limit: claims then hold slots."""
        return self.limits.concurrent

    @property
    def active(self) -> bool:
        """True if a claim must ask ``admit`` before its lease (a concurrency or a rate limit is set)."""
        return self.limits.concurrent or self.rates.limited

    def observe(self, server_time: datetime) -> None:
        """A server time the claim read (its listing's ``Date``): the rate gate's clock, free."""
        if self.rates.limited:
            self.rate.observe(server_time)

    def blocked(self) -> float | None:
        """Seconds the queue stays at a limit, or None if a job may start: at most 2 requests.

        What a worker Lambda asks before anything else: the limits (one GET,
        none if read within ``refresh``), then one LIST, of the queue's
        slots (a concurrency limit) or of its rate's current window. A queue
        without limits pays the GET alone, which its first claim reads anyway.
        """
        self.refresh()
        if self.queue_full():
            return max(self._full[None] - self._clock.monotonic(), 0.0)
        concurrency = self.limits.concurrency
        if concurrency is not None:
            busy, _ = slots.occupied(self._store, slots.scope(self._keys, None), concurrency)
            if len(busy) >= concurrency:
                self._mark_full(None)
                return FULL_FOR
            return None
        if self.rates.queue is not None:
            wait = self.rate.full(QUEUE_SCOPE, self.rates.queue)
            if wait is not None:
                self._mark_full(None, wait)
            return wait
        return None

    def due(self) -> bool:
        """True if a refill now reads the limits (no request)."""
        if not READS:
            return False
        read_at = self._read_at
        if read_at is None:
            return True
        # No limit known: a limit someone sets is rarer than its change once set.
        every = self._absent_refresh if self.limits == config.NONE else self._refresh
        return self._clock.monotonic() - read_at >= every

    def refresh(self) -> None:
        """Read the limits if ``due`` (one GET); a failed read keeps the last ones."""
        if not self.due():
            return
        self._read_at = self._clock.monotonic()
        self.reads += 1
        try:
            limits = config.read(self._store, self._keys)
        except AccessDeniedError as exc:
            if not self._denied_logged:
                self._denied_logged = True
                log.warning(
                    "cannot read the limits object %s, so this worker honours no limit "
                    "(grant it s3:GetObject on that key): %s",
                    self._keys.limits(),
                    exc,
                )
            limits = config.NONE
        except PailError:
            self._read_at = None  # read again at the next refill; keep what we knew
            raise
        if limits != self.limits:
            self._full.clear()
        self.limits = limits
        self.rates = RateLimits.from_json(limits.extra.get("rate"))
        if self.rates.reason is not None and not self._rate_reason_logged:
            self._rate_reason_logged = True
            log.warning(
                "the rate section of %s is not one pail can read (%s): at most %s starts",
                self._keys.limits(),
                self.rates.reason,
                self.rates.queue,
            )

    def forget(self) -> None:
        """Read the limits again at the next refill (a test, or an operator's change here)."""
        self._read_at = None

    def _is_full(self, scope: str | None) -> bool:
        until = self._full.get(scope)
        if until is None:
            return False
        if self._clock.monotonic() >= until:
            del self._full[scope]
            return False
        return True

    def full_for(self) -> float:
        """Seconds the queue's scope stays marked full (0 if it is not), with no request."""
        until = self._full.get(None)
        return 0.0 if until is None else max(0.0, until - self._clock.monotonic())

    def queue_full(self) -> bool:
        """True while the queue's limit was found reached (no request)."""
        limited = self.limits.concurrency is not None or self.rates.queue is not None
        return limited and self._is_full(None)

    def passes_by(self, job_id: str) -> bool:
        """True if the job's group was found at its limit: skip its entry with no request."""
        group = group_of(job_id)
        limit = self.limits.group_limit(group)
        limited = limit is not None or self.rates.group_rate(group) is not None
        return limited and self._is_full(group)

    def begin(self) -> None:
        """A claim starts: a ``look`` of an earlier claim is stale now (no request)."""
        self._looked = None

    def look(self) -> Refusal | None:
        """Before a candidate is read: the queue's Refusal if its slots are all held (one LIST).

        A claimer with no index to try first (``remember``) LISTs the queue's
        slots before it reads the entry, rather than after: a worker blocked
        by a full queue then pays that LIST alone per poll, not a GET of an
        entry it cannot run as well. The listing serves this claim's
        ``admit`` (no second LIST); a claimer with a hint, or a queue with no
        concurrency limit, sends nothing here. Only reads: it holds nothing.
        """
        limit = self.limits.concurrency
        if limit is None or self._looked is not None:
            return None
        if self._is_full(None) or limit <= 0:
            self._mark_full(None)
            return Refusal(None)
        if self._fresh_hint(None, limit):
            return None
        busy, _ = slots.occupied(self._store, slots.scope(self._keys, None), limit)
        if len(busy) >= limit:
            self._mark_full(None)
            return Refusal(None)
        self._looked = busy
        return None

    def _fresh_hint(self, scope: str | None, limit: int) -> bool:
        hint = self._hints.get(scope)
        return hint is not None and hint[0] < limit and self._clock.monotonic() - hint[1] < HINT_FOR

    def admit(self, job_id: str, lease: str, run: str) -> list[Held] | Refusal:
        """Hold every slot the job needs before its lease ``lease`` at ``run`` is written.

        The held slots (none if no limit applies to it), or the ``Refusal``
        of the first full scope (then nothing is held).
        """
        record = SlotRecord(job_id, lease, run)
        group = group_of(job_id)
        held: list[Held] = []
        wanted: list[tuple[str | None, int]] = []
        group_limit = self.limits.group_limit(group)
        if group is not None and group_limit is not None:
            wanted.append((group, group_limit))
        if self.limits.concurrency is not None:
            wanted.append((None, self.limits.concurrency))
        try:
            for scope, limit in wanted:
                slot = self._take(scope, limit, record)
                if slot is None:
                    self.give_back(held)
                    return Refusal(scope)
                held.append(slot)
            if self.rates.limited:
                refused = self._take_rates(group)
                if refused is not None:
                    self.give_back(held)
                    return refused
        except BaseException:
            self.give_back(held)
            raise
        return held

    def _take_rates(self, group: str | None) -> Refusal | None:
        """The start tokens of the job's rate limits (its group's, then the queue's); None if taken.

        After the slots, before the lease: a token is never given back, so it
        is the last thing a start takes. A refused scope is passed by (a
        group) or ends the claim (the queue) until its window ends.
        """
        scopes = self.rates.scopes(group)
        if not scopes:
            return None
        answer = self.rate.take_all(scopes)
        if answer.granted:
            return None
        refused = None if answer.refused in (None, QUEUE_SCOPE) else group
        self._mark_full(refused, answer.wait)
        return Refusal(refused, answer.wait)

    def _take(self, scope: str | None, limit: int, record: SlotRecord) -> Held | None:
        if limit <= 0 or self._is_full(scope):
            self._mark_full(scope)
            return None
        prefix = slots.scope(self._keys, scope)
        hint = self._hints.pop(scope, None)
        now = self._clock.monotonic()
        if hint is not None and hint[0] < limit and now - hint[1] < HINT_FOR:
            won = slots.take(
                self._store,
                slots.slot_key(prefix, hint[0]),
                SlotRecord(record.job_id, record.lease, record.run),
                sent_at=self._clock.monotonic(),
                group=scope,
                stats=self._stats,
            )
            if won is not None:
                return won
        busy = self._looked if scope is None else None
        if scope is None:
            self._looked = None  # one listing serves one try: a lost PUT lists afresh
        if busy is None:
            busy, _ = slots.occupied(self._store, prefix, limit)
        free = [index for index in range(limit) if index not in busy]
        if not free:
            self._mark_full(scope)
            return None
        index = self._rng.choice(free)
        won = slots.take(
            self._store,
            slots.slot_key(prefix, index),
            SlotRecord(record.job_id, record.lease, record.run),
            sent_at=self._clock.monotonic(),
            group=scope,
            stats=self._stats,
        )
        if won is None:
            self._mark_full(scope)  # raced for the last free ones: back off a moment
        return won

    def _mark_full(self, scope: str | None, seconds: float = FULL_FOR) -> None:
        self._full[scope] = self._clock.monotonic() + seconds

    def prove(
        self, held: list[Held], *, answered: float, visibility_timeout: float
    ) -> list[Held] | None:
        """``held``, each proved if need be, for a lease whose write answered at ``answered``.

        A slot whose write was sent ``slots.PROVE_AFTER`` of a visibility
        timeout or more before the lease's write answered is rewritten
        ``If-Match`` its ETag: a recovery pass may have judged its lease
        missing meanwhile. None if one was taken (the others are given back).
        """
        proved: list[Held] = []
        for slot in held:
            if answered - slot.sent_at < visibility_timeout * slots.PROVE_AFTER:
                proved.append(slot)
                continue
            again = slots.prove(
                self._store, slot, sent_at=self._clock.monotonic(), stats=self._stats
            )
            if again is None:
                self.give_back([*proved, *held[len(proved) + 1 :]])
                return None
            proved.append(again)
        return proved

    def give_back(self, held: list[Held]) -> None:
        """Free ``held`` (``DELETE If-Match``), remembering each index for this claimer's next try."""
        for slot in held:
            try:
                slots.give_back(self._store, slot)
            except PailError as exc:  # the recovery pass frees it once its lease is gone
                log.warning("slot %s: could not give it back: %s", slot.key, exc)
            self.remember(slot)

    def remember(self, slot: Held) -> None:
        """Try ``slot``'s index first next time in its scope (it was just given back)."""
        index = slots.index_of(slot.key, slots.scope(self._keys, slot.group))
        if index is not None:
            self._hints[slot.group] = (index, self._clock.monotonic())
        self._full.pop(slot.group, None)  # a slot this claimer just freed: not full for it
