"""A simulated S3 bucket: ``MemoryStore``'s semantics, plus travel time, faults and a server clock.

Each call is one logical request as ``S3Store`` makes it, so it goes through
the same retry loop botocore and ``S3Store`` put around the wire:

* the request travels (simulated latency, during which other actors run,
  and at whose ends the calling process may crash or stall);
* the server may answer a transient 500/503 (nothing applied), a 409
  ConditionalRequestConflict (conditional writes only; nothing applied), or
  apply the request and lose the response (a timeout after apply);
* on any of those the client tries again, up to ``FaultRates.attempts``
  tries, and then raises ``StorageError`` to the protocol. A retry after a
  lost response is the same request sent again, applied to the new state:
  a create-only PUT then fails on its own object (412), which is what
  ``put_conditional`` must see through.

LastModified and ``Date`` come from the simulated server clock with S3's
one-second resolution. Called outside any actor (set-up, final checks), the
store answers at once, with no faults.
"""

from __future__ import annotations

import builtins
import dataclasses
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol, TypeVar

from pail.errors import ConditionFailedError, StorageError
from pail.store.base import ListPage, ObjectInfo, StoredObject, WriteResult
from pail.store.memory import MemoryStore
from tests.simulation import scheduler as _scheduler
from tests.simulation.scheduler import Actor, Scheduler
from tests.support.shuffled_store import ShuffledStore

EPOCH = _scheduler.EPOCH

T = TypeVar("T")


class Fault(StrEnum):
    """What the simulated network or server can do to one try of a request."""

    TRANSIENT = "transient-5xx"
    CONFLICT = "conflict-409"
    TIMEOUT_AFTER_APPLY = "timeout-after-apply"
    SURFACED = "error-surfaced"
    """Not injected by itself: counts the calls whose tries all failed."""


Script = Callable[[Actor, str, str, int], Fault | None]
"""Forces a fault on one try: ``(actor, op, key, try number) -> fault or None``."""


@dataclass(frozen=True, slots=True)
class FaultRates:
    """Per-try probabilities of each fault, and how many tries a call makes."""

    transient: float = 0.0
    conflict: float = 0.0
    timeout_after_apply: float = 0.0
    attempts: int = 3

    @property
    def total(self) -> float:
        return self.transient + self.conflict + self.timeout_after_apply


@dataclass(frozen=True, slots=True)
class Latency:
    """One-way travel time of a request: mostly short, sometimes very long."""

    low: float = 0.001
    high: float = 0.03
    tail_probability: float = 0.02
    tail_high: float = 2.0
    response_timeout: float = 1.0

    def draw(self, rng: random.Random) -> float:
        if rng.random() < self.tail_probability:
            return rng.uniform(self.high, self.tail_high)
        return rng.uniform(self.low, self.high)


class Observer(Protocol):
    """What the harness learns from the store: every change, every fault, every checkpoint."""

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None: ...

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None: ...

    def checkpoint(self, actor: Actor) -> None:
        """Called at both ends of every try: where a process may crash or stall."""
        ...

    def before_request(self, actor: Actor, op: str, key: str) -> None:
        """Called before every try is sent, with what it is: where a fault can be aimed."""
        ...


class SimStore:
    """A ``Store`` whose every request is a scheduling point; see the module docstring."""

    def __init__(
        self,
        scheduler: Scheduler,
        rng: random.Random,
        observer: Observer,
        *,
        bucket: str = "sim",
        ordered_listing: bool = True,
        faults: FaultRates | None = None,
        latency: Latency | None = None,
        clock_resolution: float = 1.0,
        script: Script | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._observer = observer
        self._resolution = clock_resolution
        self.script = script
        """Forces faults on chosen tries (set after construction by a harness that aims them)."""
        seed = rng.getrandbits(32)
        # A directory bucket lists in no order across the whole prefix, not only within
        # a sorted page: ShuffledStore ranks every key by a salted hash (its docstring).
        self._inner: MemoryStore = (
            MemoryStore(bucket, now=self.server_now, seed=seed)
            if ordered_listing
            else ShuffledStore(bucket, salt=str(seed), now=self.server_now, seed=seed)
        )
        self.faults = faults or FaultRates()
        self.latency = latency or Latency()
        self.faults_enabled = True
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self._calls = 0
        self._unsettled: dict[tuple[Actor | None, tuple[str, str, bytes]], int] = {}
        self.applying = 0
        """The number of the call whose try is being applied (tries of one call share it)."""

    # -- the server's clock -------------------------------------------------

    def server_now(self) -> datetime:
        """The server clock (LastModified, Date), truncated to its resolution."""
        now = self._scheduler.now
        if self._resolution > 0:
            now = math.floor(now / self._resolution) * self._resolution
        return EPOCH + timedelta(seconds=now)

    # -- Store --------------------------------------------------------------

    @property
    def bucket(self) -> str:
        return self._inner.bucket

    @property
    def ordered_listing(self) -> bool:
        return self._inner.ordered_listing

    def get(self, key: str) -> StoredObject | None:
        return self._call("GET", key, lambda: self._inner.get(key))

    def head(self, key: str) -> ObjectInfo | None:
        return self._call("HEAD", key, lambda: self._inner.head(key))

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
        metadata: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> WriteResult:
        def apply() -> WriteResult:
            return self._inner.put(
                key,
                body,
                if_none_match=if_none_match,
                if_match=if_match,
                metadata=metadata,
                content_type=content_type,
            )

        op = "PUT" + (" if-none-match" if if_none_match else "") + (" if-match" if if_match else "")
        conditional = if_none_match or if_match is not None
        return self._call(
            op, key, apply, mutates=True, conditional=conditional, resend_of=(op, key, body)
        )

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        op = "DELETE" + (" if-match" if if_match else "")
        self._call(
            op,
            key,
            lambda: self._inner.delete(key, if_match=if_match),
            mutates=True,
            conditional=if_match is not None,
        )

    def list(
        self,
        prefix: str,
        *,
        max_keys: int = 1000,
        start_after: str | None = None,
        continuation: str | None = None,
    ) -> ListPage:
        return self._call(
            "LIST",
            prefix,
            lambda: self._inner.list(
                prefix, max_keys=max_keys, start_after=start_after, continuation=continuation
            ),
        )

    def presign_get(self, key: str, expires_in: int) -> str:
        return self._inner.presign_get(key, expires_in)

    # -- for the harness (never faulted, never scheduled) -------------------

    def peek(self, key: str) -> StoredObject | None:
        """The object as it is now, outside the simulation."""
        return self._inner.get(key)

    def keys(self) -> builtins.list[str]:
        return self._inner.keys()

    def plant(self, key: str, body: bytes) -> None:
        """Put ``body`` at ``key`` before the run, outside it (``limits``: the limits set beforehand)."""
        self._inner.put(key, body)

    # -- the request loop ---------------------------------------------------

    def _call(
        self,
        op: str,
        key: str,
        apply: Callable[[], T],
        *,
        mutates: bool = False,
        conditional: bool = False,
        resend_of: tuple[str, str, bytes] | None = None,
    ) -> T:
        actor = self._scheduler.current
        self._calls += 1
        call = self._calls
        # The same request sent again by a caller that could not learn whether
        # the last one landed (pail's enqueue does, as botocore would) is the
        # same write: it keeps that call's number.
        request = (actor, resend_of) if resend_of is not None else None
        if request is not None and request in self._unsettled:
            call = self._unsettled.pop(request)
        if actor is None:
            self.applying = call
            return self._apply(None, op, key, apply, mutates)
        if not actor.process.alive:
            # A dead process sends nothing: code unwinding from its crash (a ``finally``,
            # the drain's release on the way out) stops at its first request.
            raise _scheduler.Crash(actor.process.name)
        self.requests += 1
        try:
            return self._tries(actor, op, key, apply, call, mutates, conditional)
        except ConditionFailedError:
            raise
        except StorageError:
            if request is not None:
                self._unsettled[request] = call  # it may have landed: a resend is this write
            raise

    def _tries(
        self,
        actor: Actor,
        op: str,
        key: str,
        apply: Callable[[], T],
        call: int,
        mutates: bool,
        conditional: bool,
    ) -> T:
        tries = max(1, self.faults.attempts)
        for attempt in range(1, tries + 1):
            self._observer.before_request(actor, op, key)
            self._travel(actor)
            fault = self._draw(mutates, conditional)
            if self.script is not None:
                fault = self.script(actor, op, key, attempt) or fault
            if fault in (Fault.TRANSIENT, Fault.CONFLICT):
                self._observer.request(actor, op, key, f"{fault} (not applied)")
                self._give_up_or_back_off(attempt, tries, op, key, fault)
                continue
            self.applying = call
            try:
                result = self._apply(actor, op, key, apply, mutates)
                failed: ConditionFailedError | None = None
            except ConditionFailedError as exc:
                failed = exc
            if fault is Fault.TIMEOUT_AFTER_APPLY:
                self._observer.request(actor, op, key, f"{fault} (response lost)")
                self._scheduler.sleep(self.latency.response_timeout)
                self._give_up_or_back_off(attempt, tries, op, key, fault)
                continue
            self._travel(actor)
            # As S3Store reports botocore's RetryAttempts: after a resend, a
            # failed condition or a success may follow an earlier applied try.
            if failed is not None:
                failed.retried = attempt > 1
                raise failed
            if attempt > 1 and isinstance(result, WriteResult):
                return dataclasses.replace(result, retried=True)
            return result
        raise AssertionError("unreachable: the last try either returns or raises")

    def _apply(
        self, actor: Actor | None, op: str, key: str, apply: Callable[[], T], mutates: bool
    ) -> T:
        if not mutates:
            result = apply()
            if actor is not None:
                self._observer.request(actor, op, key, "ok")
            return result
        before = self._inner.get(key)
        try:
            result = apply()
        except ConditionFailedError:
            self._observer.request(actor, op, key, "412")
            raise
        after = self._inner.get(key)
        self._observer.request(actor, op, key, "ok" if after is None else f"ok {after.etag}")
        if before != after:
            self._observer.mutated(key, before, after, actor)
        return result

    def _travel(self, actor: Actor) -> None:
        self._observer.checkpoint(actor)
        self._scheduler.sleep(self.latency.draw(self._rng))
        self._observer.checkpoint(actor)

    def _draw(self, mutates: bool, conditional: bool) -> Fault | None:
        if not self.faults_enabled:
            return None
        rates = self.faults
        roll = self._rng.random()
        if roll < rates.transient:
            fault = Fault.TRANSIENT
        elif mutates and roll < rates.transient + rates.timeout_after_apply:
            fault = Fault.TIMEOUT_AFTER_APPLY
        elif conditional and roll < rates.total:
            fault = Fault.CONFLICT
        else:
            return None
        self.injected[fault] += 1
        return fault

    def _give_up_or_back_off(
        self, attempt: int, tries: int, op: str, key: str, fault: Fault
    ) -> None:
        if attempt == tries:
            self.injected[Fault.SURFACED] += 1
            raise StorageError(f"simulated {fault} on {op} {key!r}, {tries} tries")
        self._scheduler.sleep(self._rng.uniform(0, 0.05 * 2**attempt))


class NullObserver:
    """An ``Observer`` that records nothing and injects no crash: for a store used on its own."""

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        pass

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        pass

    def checkpoint(self, actor: Actor) -> None:
        pass

    def before_request(self, actor: Actor, op: str, key: str) -> None:
        pass
