"""Rate limits: at most R job starts per window of the server's clock, per queue and per group.

A start first takes a **token**: a create-only object ::

    {ns}/_pail/rate/{scope}/{per}s/{window}/{slot}

where ``window`` is the server's time in whole seconds divided by ``per``
(the period, rounded down), and ``slot`` is a number below R. Create-only
(``If-None-Match: *``) makes each slot one start's: a window has R slots, so
at most R tokens. ``scope`` is ``queue`` or ``group/{name}``.

**The server's clock alone.** A taker never trusts its own clock for the
window. It guesses the window from the last server time it read (a
response's ``Date`` plus the monotonic time since, which never runs ahead
of the server's), writes the token, and then reads the server's time in the
write's response: the token counts only if that time lies in the window its
key names. A write that landed in another window (the taker stalled, or its
guess lagged across a boundary) is not a start; its slot stays taken (that
window is over, or it only ever lowers a window's count). So: **every start
is granted by a token whose write the server applied inside the window its
key names, and a window of the server's clock grants at most R starts**
(``docs/limits.md``, "Rate limits", has the guarantee in full; a fixed
window, so any P seconds straddling two windows may hold up to 2R).

Why fixed-window tokens rather than one token-bucket record updated by
compare-and-swap: a record every start rewrites is one hot object on which
racing workers' CAS writes fail in turn (one winner per round), while R
slots spread the race; create-only writes work on every backend pail runs
on; and a token is never read or rewritten, so foreign bytes in one cannot
mislead anybody (presence is the token: a foreign object at a slot's key
takes that slot, any other key under the prefix is passed by).

**Cost**: a start without contention costs one PUT. After a failed write
(another taker had that slot), or when this taker was refused or contended in
the previous window, it LISTs the window (one page: R is at most
``MAX_RATE``) and picks a free slot at random. A full window makes the
taker wait until the window's end (plus a little jitter, so blocked takers
do not all wake at once); a queue with no rate limit sends nothing.

**Expiry**: tokens of past windows are garbage. The construct's lifecycle
rule expires the prefix a day after each write (which is why a period is at
most a day: no token expires while its window lasts); ``sweep`` deletes past
windows' tokens (bounded per call) for buckets without one.
"""

from __future__ import annotations

import logging
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from pail.clock import Clock
from pail.codec import dumps
from pail.errors import ConfigurationError, DecodeError, PailError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store, WriteResult

log = logging.getLogger("pail")

MAX_RATE = 1000
"""The most starts one window may grant: its tokens fit one listing page."""
MAX_PER = 86_400
"""The longest period, in seconds (a day): the construct's lifecycle rule expires tokens a day
after their write at the earliest (S3 rounds up to midnight UTC), so it never frees a slot of
a window that can still grant starts."""
MAX_WRITES_PER_TAKE = 3
"""Token writes one take tries before it says "busy" (each after learning more of the window)."""
WAKE_SPREAD = 0.9
"""A refused taker wakes within this share of ``min(per, 1 s)`` after the window's end: spread out, takers race less for the next window's slots."""
BUSY_WAIT = 0.05
"""Seconds a taker that lost ``MAX_WRITES_PER_TAKE`` races in a row waits before trying again."""
QUEUE_SCOPE = "queue"
GROUP_SCOPE = "group/"
MAX_SCOPE = 400
"""The longest scope segment of a key (a group's name, percent-encoded, and ``group/``)."""

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86_400),
}
_RATE_TEXT = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``max`` starts per window of ``per`` seconds of the server's clock.

    >>> Rate.parse("10/s"), Rate.parse("1000/h"), Rate.parse("5/2s")
    (Rate(max=10, per=1), Rate(max=1000, per=3600), Rate(max=5, per=2))
    >>> str(Rate(1000, 3600))
    '1000/h'
    """

    max: int
    per: int

    def __post_init__(self) -> None:
        for name, value, high in (("max", self.max, MAX_RATE), ("per", self.per, MAX_PER)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigurationError(
                    f"a rate's {name} must be a whole number from 1 to {high}, got {value!r}"
                )

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"10/s"``, ``"1000/h"``, ``"5/2s"``, ``"100/min"``, ``"20/day"``: a ``Rate``, or ``ConfigurationError``."""
        found = _RATE_TEXT.match(text.lower()) if isinstance(text, str) else None
        unit = _UNITS.get(found.group(3)) if found else None
        if found is None or unit is None:
            raise ConfigurationError(
                f"invalid rate {text!r}: write COUNT/PERIOD, e.g. 10/s, 1000/h, 5/2s, 100/min"
            )
        count = int(found.group(2) or "1")
        return cls(int(found.group(1)), count * unit)

    def __str__(self) -> str:
        for unit, seconds in (("d", 86_400), ("h", 3600), ("min", 60)):
            if self.per == seconds:
                return f"{self.max}/{unit}"
        return f"{self.max}/s" if self.per == 1 else f"{self.max}/{self.per}s"

    def to_json(self) -> dict[str, int]:
        return {"max": self.max, "per": self.per}

    @classmethod
    def from_json(cls, value: object) -> Rate:
        """The rate a record holds; ``DecodeError`` for anything else (foreign bytes are input).

        >>> Rate.from_json({"max": 5, "per": 1})
        Rate(max=5, per=1)
        >>> Rate.from_json({"max": 5.5, "per": 1})
        Traceback (most recent call last):
        ...
        pail.errors.DecodeError: not a rate: {'max': 5.5, 'per': 1}
        """
        if isinstance(value, Mapping):
            count, per = value.get("max"), value.get("per")
            if isinstance(count, int) and isinstance(per, int):
                try:
                    return cls(count, per)
                except ConfigurationError:
                    pass
        raise DecodeError(f"not a rate: {str(value)[:200]}")

    def window(self, at: datetime) -> int:
        """The window ``at`` (a server time) falls in."""
        return math.floor(at.timestamp()) // self.per

    def window_end(self, window: int) -> float:
        """The epoch second at which ``window`` ends."""
        return float((window + 1) * self.per)


FOREIGN_RATE = Rate(1, 1)
"""The queue's rate while the limits object's ``rate`` section holds bytes pail cannot read:
someone meant a rate limit, and one start a second is below any they can have meant."""
MAX_GROUP_RATES = 1000


@dataclass(frozen=True, slots=True)
class RateLimits:
    """A queue's rate limits: the ``rate`` section of its limits object (``_pail/limits``).

    ``queue``: the queue's; ``group``: every group's (each its own windows)
    unless ``groups`` names its own. The section's JSON::

        "rate": {"queue": {"max": 10, "per": 1}, "group": {"max": 2, "per": 1},
                 "groups": {"tenant-42": {"max": 5, "per": 1}}}

    >>> RateLimits.from_json({"queue": {"max": 10, "per": 1}}).queue
    Rate(max=10, per=1)
    >>> RateLimits.from_json("junk").queue, RateLimits.from_json("junk").reason is not None
    (Rate(max=1, per=1), True)
    """

    queue: Rate | None = None
    group: Rate | None = None
    groups: Mapping[str, Rate] = field(default_factory=dict)
    reason: str | None = None
    """Why the section could not be read (then ``queue`` is ``FOREIGN_RATE``)."""

    @property
    def limited(self) -> bool:
        """True if any start must take a token."""
        return self.queue is not None or self.group is not None or bool(self.groups)

    def group_rate(self, group: str | None) -> Rate | None:
        if group is None:
            return None
        return self.groups.get(group, self.group)

    def scopes(self, group: str | None) -> list[tuple[str, Rate]]:
        """The scopes a start of a job of ``group`` takes a token in: its group's, then the queue's."""
        found: list[tuple[str, Rate]] = []
        group_rate = self.group_rate(group)
        if group is not None and group_rate is not None:
            found.append((group_scope(group), group_rate))
        if self.queue is not None:
            found.append((QUEUE_SCOPE, self.queue))
        return found

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {}
        if self.queue is not None:
            data["queue"] = self.queue.to_json()
        if self.group is not None:
            data["group"] = self.group.to_json()
        if self.groups:
            data["groups"] = {name: r.to_json() for name, r in sorted(self.groups.items())}
        return data

    @classmethod
    def from_json(cls, value: object) -> RateLimits:
        """The section's rates; never raises (foreign bytes limit the queue to ``FOREIGN_RATE``)."""
        if value is None:
            return NO_RATES
        try:
            if not isinstance(value, Mapping):
                raise DecodeError(f"a rate section must be an object, not {type(value).__name__}")
            queue, group, overrides = (
                value.get("queue"),
                value.get("group"),
                value.get("groups", {}),
            )
            if not isinstance(overrides, Mapping) or len(overrides) > MAX_GROUP_RATES:
                raise DecodeError(f"groups must be an object of at most {MAX_GROUP_RATES} rates")
            groups: dict[str, Rate] = {}
            for name, rate in overrides.items():
                if not isinstance(name, str) or not name:
                    raise DecodeError(f"{name!r} is not a group name")
                group_scope(name)
                groups[name] = Rate.from_json(rate)
            return cls(
                queue=None if queue is None else Rate.from_json(queue),
                group=None if group is None else Rate.from_json(group),
                groups=groups,
            )
        except (DecodeError, ConfigurationError) as exc:
            return cls(queue=FOREIGN_RATE, reason=str(exc))


NO_RATES = RateLimits()


def set_rate(
    store: Store,
    keys: Keys,
    rate: Rate | None,
    *,
    group: str | None = None,
    stats: WriteStats | None = None,
) -> RateLimits:
    """Set (or with None remove) one rate limit in the queue's limits object; the rates now in force.

    ``group=None``: the queue's; ``group="*"``: every group's without its own;
    ``group="tenant-42"``: that group's own. The concurrency limits and any
    other key of the object are kept. A read, then a write conditional on it
    (``If-Match``, or ``If-None-Match`` for the first limit), retried when
    another writer changed it meanwhile, as ``config.set_limit``.

    >>> from pail.store.memory import MemoryStore
    >>> store, keys = MemoryStore(), Keys()
    >>> set_rate(store, keys, Rate(10, 1)).queue, set_rate(store, keys, Rate(2, 1), group="*").queue
    (Rate(max=10, per=1), Rate(max=10, per=1))
    """
    from pail.protocol.limits import config, groups

    if group is not None and group != groups.DEFAULT:
        groups.validate(group)
    in_force: list[RateLimits] = []

    def change(current: config.Limits) -> config.Limits:
        rates = RateLimits.from_json(current.extra.get("rate"))
        if rates.reason is not None:
            rates = NO_RATES
        if group is None:
            rates = replace(rates, queue=rate)
        elif group == groups.DEFAULT:
            rates = replace(rates, group=rate)
        else:
            own = {name: r for name, r in rates.groups.items() if name != group}
            if rate is not None:
                own[group] = rate
            if len(own) > MAX_GROUP_RATES:
                raise ConfigurationError(f"at most {MAX_GROUP_RATES} groups with own rates")
            rates = replace(rates, groups=own)
        extra: dict[str, object] = {k: v for k, v in current.extra.items() if k != "rate"}
        if rates.limited:
            extra["rate"] = rates.to_json()
        in_force[:] = [rates]
        return replace(current, extra=extra)

    config.update(store, keys, change, stats=stats)
    return in_force[0]


def group_scope(group: str) -> str:
    """The scope segment of a group's tokens: its name percent-encoded, so any name is one segment.

    >>> group_scope("tenant-42"), group_scope("a/b c")
    ('group/tenant-42', 'group/a%2Fb%20c')
    """
    scope = GROUP_SCOPE + quote(group, safe="-_.~")
    if not group or len(scope) > MAX_SCOPE:
        raise ConfigurationError(f"a group's name must be 1 to about 390 characters, got {group!r}")
    return scope


def scope_group(scope: str) -> str | None:
    """The group a scope segment names, or None for the queue's scope."""
    return unquote(scope[len(GROUP_SCOPE) :]) if scope.startswith(GROUP_SCOPE) else None


def period_prefix(keys: Keys, scope: str, rate: Rate) -> str:
    """The prefix of every window of ``scope`` at ``rate``'s period."""
    return f"{keys.rate_tokens()}{scope}/{rate.per}s/"


def window_prefix(keys: Keys, scope: str, rate: Rate, window: int) -> str:
    """The prefix of one window's tokens (its slots are the keys right under it)."""
    return f"{period_prefix(keys, scope, rate)}{window:012d}/"


def token_key(keys: Keys, scope: str, rate: Rate, window: int, slot: int) -> str:
    """The key of one slot of one window.

    >>> token_key(Keys("q"), "queue", Rate(10, 1), 1767225600, 3)
    'q/_pail/rate/queue/1s/001767225600/0003'
    """
    return f"{window_prefix(keys, scope, rate, window)}{slot:04d}"


def parse_slot(name: str) -> int | None:
    """The slot a key's last segment names (four decimal digits), or None for any other name."""
    if len(name) == 4 and name.isascii() and name.isdigit():
        return int(name)
    return None


@dataclass(frozen=True, slots=True)
class TokenKey:
    """What a key under the rate prefix names: a scope, a period, a window and a slot."""

    scope: str
    per: int
    window: int
    slot: int


def parse_token_key(keys: Keys, key: str) -> TokenKey | None:
    """The token a key names, or None for a key pail never writes there (passed by, never raised).

    >>> parse_token_key(Keys(), "_pail/rate/group/t1/1s/001767225600/0003")
    TokenKey(scope='group/t1', per=1, window=1767225600, slot=3)
    >>> parse_token_key(Keys(), "_pail/rate/queue/1s/garbage") is None
    True
    """
    prefix = keys.rate_tokens()
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) == 4:
        scope, per_text, window_text, slot_text = parts
    elif len(parts) == 5 and parts[0] == GROUP_SCOPE.rstrip("/"):
        scope = f"{parts[0]}/{parts[1]}"
        per_text, window_text, slot_text = parts[2:]
    else:
        return None
    slot = parse_slot(slot_text)
    if scope != QUEUE_SCOPE and not (scope.startswith(GROUP_SCOPE) and len(scope) > 6):
        return None
    if (
        slot is None
        or not per_text.endswith("s")
        or not per_text[:-1].isascii()
        or not per_text[:-1].isdigit()
        or len(window_text) != 12
        or not window_text.isascii()
        or not window_text.isdigit()
    ):
        return None
    per = int(per_text[:-1])
    if not 1 <= per <= MAX_PER:
        return None
    return TokenKey(scope, per, int(window_text), slot)


AHEAD = 2.0
"""Seconds an estimate of the server's clock may lead a fresh reading of it before it is reset."""


class ServerClock:
    """A lower bound of the server's time: the latest ``Date`` read, plus the monotonic time since.

    ``Date`` is truncated to the second and stamped before the response
    travels, so every reading is at or behind the server's time; so is this
    estimate, by up to a second plus the travel. Only server readings move
    it (``observe``): a local wall clock could run ahead.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._seconds: float | None = None
        self._at = 0.0

    @property
    def known(self) -> bool:
        return self._seconds is not None

    def observe(self, server_time: datetime) -> None:
        """A time the server reported (a response's ``Date``, an object's ``LastModified``).

        A later reading moves the estimate on; one well behind it (more than
        ``AHEAD`` seconds: more than truncation and travel explain) means the
        estimate ran ahead (a monotonic clock faster than the server's, a
        suspended host), and the reading replaces it.
        """
        seconds = server_time.timestamp()
        estimate = self.seconds()
        if self._seconds is None or seconds > estimate or seconds < estimate - AHEAD:
            self._seconds, self._at = seconds, self._clock.monotonic()

    def seconds(self) -> float:
        """The estimate, as epoch seconds (0 before any reading)."""
        if self._seconds is None:
            return 0.0
        return self._seconds + max(0.0, self._clock.monotonic() - self._at)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.seconds(), UTC)


@dataclass(frozen=True, slots=True)
class Take:
    """The answer to "may I start a job now?" and what asking cost.

    ``granted``: yes, a token is this start's (``key``, granted at
    ``granted_at``, the server's time read in the write's response).
    Refused: ``wait`` is how long to wait before asking again (until the
    full window's end, or a moment after losing races). ``requests`` and
    ``failed`` count the requests sent and the conditional writes that lost.
    """

    granted: bool
    key: str | None = None
    granted_at: datetime | None = None
    wait: float = 0.0
    requests: int = 0
    failed: int = 0
    full: bool = False
    """Refused because a listing showed every slot of the window taken."""
    wasted: int = 0
    """Tokens taken (in other scopes of a ``take_all``) that start nothing."""
    tokens: tuple[tuple[str, str], ...] = ()
    """The tokens this start holds, as ``(key, write token)``: one per scope."""
    refused: str | None = None
    """The scope that refused (a ``take_all``'s first refusal)."""


@dataclass
class _Window:
    """What one taker knows of one scope's current window."""

    window: int
    max: int
    taken: set[int] = field(default_factory=set)
    listed: bool = False
    full: bool = False


@dataclass
class GateStats:
    """A gate's totals, for benchmarks and tests."""

    takes: int = 0
    granted: int = 0
    refused_full: int = 0
    busy: int = 0
    requests: int = 0
    failed: int = 0
    misfiled: int = 0
    """Tokens whose write landed outside the window their key names (not starts)."""


def _write_token(
    store: Store, key: str, body: bytes, token: str, stats: WriteStats | None
) -> WriteResult | None:
    """The token's create-only PUT; None if the slot was someone else's."""
    return put_conditional(store, key, body, token, if_none_match=True, stats=stats, reason="rate")


def _counts(result: WriteResult, rate: Rate, window: int) -> bool:
    """True if the write's server time lies in the window its key names: only then is it a start."""
    return rate.window(result.server_time) == window


class _Hot:
    """Scopes seen contended: a taker lists before it writes until ``COOL_AFTER`` clean grants.

    One clean grant does not mean the race is over (16 workers at 5 a second
    win cleanly now and then); writing blind again at once would lose more
    writes than the LIST it saves.
    """

    COOL_AFTER = 4

    def __init__(self) -> None:
        self._left: dict[tuple[str, int], int] = {}

    def add(self, scope: tuple[str, int]) -> None:
        self._left[scope] = self.COOL_AFTER

    def cooled(self, scope: tuple[str, int]) -> None:
        left = self._left.get(scope, 0) - 1
        if left > 0:
            self._left[scope] = left
        else:
            self._left.pop(scope, None)

    def __contains__(self, scope: object) -> bool:
        return scope in self._left


class RateGate:
    """Takes start tokens for one claimer. Not thread-safe: one per worker thread, like ``Claimer``.

    >>> from pail.clock import ManualClock
    >>> from pail.store.memory import MemoryStore
    >>> gate = RateGate(MemoryStore(), Keys(), clock=ManualClock(), owner="w1")
    >>> [gate.take(QUEUE_SCOPE, Rate(2, 60)).granted for _ in range(3)]
    [True, True, False]
    """

    def __init__(
        self,
        store: Store,
        keys: Keys,
        *,
        clock: Clock,
        owner: str,
        rng: random.Random | None = None,
        stats: WriteStats | None = None,
    ) -> None:
        self._store = store
        self._keys = keys
        self._clock = clock
        self._owner = owner
        self._rng = rng or random.Random()
        self._write_stats = stats
        self.server = ServerClock(clock)
        self._windows: dict[tuple[str, int], _Window] = {}
        self._hot = _Hot()
        """Scopes this taker saw contended or full lately: list before writing."""
        self.stats = GateStats()

    def observe(self, server_time: datetime) -> None:
        """Feed a server time read elsewhere (the claim's listing): no request of its own."""
        self.server.observe(server_time)

    def take(self, scope: str, rate: Rate) -> Take:
        """Try to take a start token of ``scope`` under ``rate``: granted, or how long to wait.

        Never raises on contention; a storage error propagates like a failed
        claim's. See the module docstring for the requests it sends.
        """
        requests = failed = writes = 0
        slot_scope = (scope, rate.per)
        self.stats.takes += 1
        # Each turn lists or writes (or returns): a bounded number of requests per take.
        for _ in range(2 * MAX_WRITES_PER_TAKE + 2):
            if self.server.known:
                now = self.server.seconds()
            else:
                # No reading of the server's clock yet: guess the window from the local
                # clock and list it; the listing's Date says whether the guess was right.
                now = self._clock.now().timestamp()
                self._hot.add(slot_scope)
            window = rate.window(datetime.fromtimestamp(now, UTC))
            state = self._windows.get(slot_scope)
            if state is None or (state.window, state.max) != (window, rate.max):
                state = _Window(window, rate.max)
                self._windows[slot_scope] = state
            if state.full:
                return self._refused(rate, state, now, requests, failed)
            if slot_scope in self._hot and not state.listed:
                prefix = window_prefix(self._keys, scope, rate, window)
                page = self._store.list(prefix)
                requests += 1
                self.server.observe(page.server_time)
                if rate.window(page.server_time) != window:
                    continue  # the window moved on (or the local guess was wrong): again
                state.listed = True
                for item in page.items:
                    slot = parse_slot(item.key[len(prefix) :])
                    if slot is not None and slot < rate.max:
                        state.taken.add(slot)
                if len(state.taken) >= rate.max:
                    state.full = True
                    return self._refused(rate, state, now, requests, failed)
            if writes >= MAX_WRITES_PER_TAKE:
                break
            free = [slot for slot in range(rate.max) if slot not in state.taken]
            if not free:
                state.full = True
                continue
            slot = self._rng.choice(free)
            key = token_key(self._keys, scope, rate, window, slot)
            write = new_token()
            body = dumps({"v": 1, "w": write, "by": self._owner[:200]})
            written = _write_token(self._store, key, body, write, self._write_stats)
            requests, writes = requests + 1, writes + 1
            state.taken.add(slot)
            if written is None:
                failed += 1
                state.listed = False  # learn the window's other slots before the next write
                self._hot.add(slot_scope)
                continue
            self.server.observe(written.server_time)
            if not _counts(written, rate, window):
                self.stats.misfiled += 1
                continue  # not a start: its write landed in another window
            if failed == 0:
                self._hot.cooled(slot_scope)
            granted = Take(
                True, key, written.server_time, 0.0, requests, failed, tokens=((key, write),)
            )
            return self._granted(granted)
        self.stats.busy += 1
        self._hot.add(slot_scope)
        return self._account(Take(False, wait=BUSY_WAIT, requests=requests, failed=failed))

    def take_all(self, scopes: Sequence[tuple[str, Rate]]) -> Take:
        """Take one token of each scope in turn (a group's, then the queue's); refused at the first refusal.

        Tokens already taken when a later scope refuses start nothing (``wasted``):
        they only lower their windows' counts, which is the safe side.
        """
        if not scopes:
            return Take(True)
        requests = failed = 0
        taken: list[Take] = []
        for scope, rate in scopes:
            answer = self.take(scope, rate)
            requests, failed = requests + answer.requests, failed + answer.failed
            if not answer.granted:
                return Take(
                    False,
                    wait=answer.wait,
                    requests=requests,
                    failed=failed,
                    full=answer.full,
                    wasted=len(taken),
                    refused=scope,
                )
            taken.append(answer)
        last = taken[-1]
        tokens = tuple(token for answer in taken for token in answer.tokens)
        return Take(True, last.key, last.granted_at, 0.0, requests, failed, tokens=tokens)

    def full(self, scope: str, rate: Rate) -> float | None:
        """Seconds until the current window ends if it is full, else None: one LIST, no write.

        A worker Lambda's look before it claims (``Gate.blocked``). The
        listing's ``Date`` names the window; a window this taker already
        knows full costs nothing.
        """
        slot_scope = (scope, rate.per)
        state = self._windows.get(slot_scope)
        if self.server.known and state is not None and state.full:
            now = self.server.seconds()
            if rate.window(datetime.fromtimestamp(now, UTC)) == state.window:
                return max(0.0, rate.window_end(state.window) - now)
        guess = self.server.seconds() if self.server.known else self._clock.now().timestamp()
        window = rate.window(datetime.fromtimestamp(guess, UTC))
        prefix = window_prefix(self._keys, scope, rate, window)
        page = self._store.list(prefix)
        self.server.observe(page.server_time)
        self.stats.requests += 1
        if rate.window(page.server_time) != window:
            return None  # the guess was another window: say nothing is known, the claim will see
        taken = {
            slot
            for item in page.items
            if (slot := parse_slot(item.key[len(prefix) :])) is not None and slot < rate.max
        }
        state = _Window(window, rate.max, taken, listed=True, full=len(taken) >= rate.max)
        self._windows[slot_scope] = state
        if not state.full:
            return None
        self._hot.add(slot_scope)
        return max(0.0, rate.window_end(window) - self.server.seconds())

    def _refused(self, rate: Rate, state: _Window, now: float, requests: int, failed: int) -> Take:
        self.stats.refused_full += 1
        wait = max(0.0, rate.window_end(state.window) - now)
        wait += self._rng.uniform(0.0, min(float(rate.per), 1.0) * WAKE_SPREAD)
        return self._account(Take(False, wait=wait, requests=requests, failed=failed, full=True))

    def _granted(self, take: Take) -> Take:
        self.stats.granted += 1
        return self._account(take)

    def _account(self, take: Take) -> Take:
        self.stats.requests += take.requests
        self.stats.failed += take.failed
        return take


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one ``sweep`` did: tokens deleted, requests sent, keys passed by."""

    deleted: int = 0
    lists: int = 0
    foreign: int = 0
    more: bool = False
    """True when it stopped at its bound with past windows left."""


def _over(token: TokenKey, server_seconds: int) -> bool:
    """True once ``token``'s window has ended by ``server_seconds`` (a listing's Date)."""
    return (token.window + 1) * token.per <= server_seconds


def sweep(store: Store, keys: Keys, *, max_deletes: int = 1000) -> SweepReport:
    """Delete the tokens of windows that are over, at most ``max_deletes`` of them.

    A window is over when it ended by the server time of the listing that
    found it (a lower bound of the time the DELETE lands), so no token of a
    window that can still grant starts is removed. Keys under the prefix that
    name no token are passed by and counted (the lifecycle rule expires them).
    A queue that never had a rate limit pays one LIST of an empty prefix.
    """
    deleted = lists = foreign = 0
    continuation: str | None = None
    while True:
        page = store.list(keys.rate_tokens(), continuation=continuation)
        lists += 1
        server = math.floor(page.server_time.timestamp())
        for item in page.items:
            token = parse_token_key(keys, item.key)
            if token is None:
                foreign += 1
                continue
            if not _over(token, server):
                continue
            if deleted >= max_deletes:
                return SweepReport(deleted, lists, foreign, more=True)
            try:
                store.delete(item.key)
            except PailError as exc:
                log.warning("could not delete the rate token %s: %s", item.key, exc)
                continue
            deleted += 1
        continuation = page.next_token
        if continuation is None:
            return SweepReport(deleted, lists, foreign)
