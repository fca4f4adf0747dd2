"""What a worker woken by an event claims: the jobs the event names first, the listing only after a win.

An S3 *Object Created* event names the pending entry it announces
(``queue/{id}``). Every enqueue's event invokes the worker Lambda, and in a
burst most of those invocations find their job already run by an earlier
invocation that drained the queue. So a woken worker claims the named
entries first (``Pail.claim_key``: no listing; an entry already taken costs
one GET), and goes on to list and drain only once it won one of them, while
its limits leave it time (the drain checks them before every claim). An
invocation that won nothing returns: whoever took its job runs it, and
every entry that becomes pending again (a retry, a release, the reaper's
requeue) is written anew and sends an event of its own.

It lists from the start, as before, when nothing names a job of this queue:
a schedule, the reaper's self-heal, a direct invoke, or an event whose keys
are all foreign (another queue's, a console folder). It lists after the
named keys too when one of them is a delayed entry that looks due, since
only a listing's server time may promote one (``Named.DUE``).

>>> from pail import Pail
>>> from pail.store import MemoryStore
>>> queue = Pail(MemoryStore("jobs"))
>>> claims = NamedFirst(queue, [queue.keys.queue(queue.enqueue({"n": 1}))])
>>> claims().payload, claims(), dict(claims.found)
({'n': 1}, None, {'claimed': 1})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from pail.protocol.claim import Named

MAX_NAMED_KEYS = 100
"""Named entries one drain claims by name; an event naming more lists for the rest."""


class Claims[T](Protocol):
    """What ``NamedFirst`` claims through: a ``Pail`` (messages), or a claimer (leases)."""

    def claim_key(self, key: str) -> T | None: ...

    @property
    def named_claim_found(self) -> Named | None: ...

    def claim(self) -> T | None: ...


class NamedFirst[T]:
    """A drain's claim (``drain(claim, ...)``): the named entries first, then the listing if one was won.

    ``found`` counts what the named claims found, by ``Named`` value.
    """

    def __init__(self, pail: Claims[T], keys: Iterable[str]) -> None:
        self._pail = pail
        named = list(dict.fromkeys(keys))
        self._keys = named[:MAX_NAMED_KEYS]
        self._list = not named or len(named) > MAX_NAMED_KEYS
        self.found: Counter[str] = Counter()

    def __call__(self) -> T | None:
        while self._keys:
            message = self._pail.claim_key(self._keys.pop(0))
            found = self._pail.named_claim_found or Named.GONE
            self.found[found.value] += 1
            if message is not None:
                self._list = True  # it won: drain on while the limits allow
                return message
            if found is Named.PAUSED:
                self._keys.clear()
                return None  # the drain reads claims_paused and stops as paused
            if found is Named.LIMITED:
                # Its group or the queue is at a limit: the listing claims another group's
                # job, or (the queue full, known without a request) ends as limited.
                self._list = True
            if found is Named.DUE:
                self._list = True
        if not self._list and set(self.found) == {Named.FOREIGN.value}:
            self._list = True  # nothing named a job of this queue: drain as a schedule does
        return self._pail.claim() if self._list else None
