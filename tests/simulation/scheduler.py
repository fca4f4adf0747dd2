"""A seeded, single-threaded scheduler: actors are greenlets, time is simulated.

Every actor (a worker's main loop, its heartbeat, a reaper, a producer) runs
in its own greenlet and gives control back whenever it waits: for a storage
request to travel, for a handler to run, for its next poll. Nothing sleeps
and there are no OS threads, so a run is a pure function of its seed.

Actors belong to a ``Process``. A process can crash (every actor of it is
killed at once, with no chance to clean up) or be frozen until a later time
(a GC pause, a SIGSTOP, an overloaded host: a zombie that resumes later).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from greenlet import GreenletExit, getcurrent, greenlet


class Crash(BaseException):
    """Raised inside an actor whose process crashed; nothing in pail may catch it."""


@dataclass(eq=False)
class Process:
    """An OS process being simulated: its actors live and die together."""

    name: str
    kind: str
    clock_offset: float
    alive: bool = True
    frozen_until: float = 0.0
    actors: list[Actor] = field(default_factory=list)


@dataclass(eq=False)
class Actor:
    """One greenlet of a process, and where it is in the scheduler's queue."""

    name: str
    process: Process
    task: greenlet | None = None
    epoch: int = 0
    finished: bool = False


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time 0 on a wall clock (the server's, and a process's before its skew)."""


class ProcessClock:
    """``pail.clock.Clock`` for one process: simulated time plus that process's offset.

    A monotonic clock has an arbitrary origin, so each process gets its own:
    the protocol may only ever subtract two readings of the same clock. The
    wall clock (``now``) is the simulated time plus the process's ``skew``
    (``World.wall_clock``), from ``EPOCH``: a producer's ``Pail`` takes this
    clock, so a relative ``delay`` counts from its skewed wall clock.
    """

    def __init__(self, scheduler: Scheduler, offset: float, *, skew: float = 0.0) -> None:
        self._scheduler = scheduler
        self._offset = offset
        self._skew = skew

    def monotonic(self) -> float:
        return self._scheduler.now + self._offset

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self._scheduler.now + self._skew)

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        if isinstance(wake, SimEvent):
            wake.wait(seconds)  # ended early by ``set``, as ``threading.Event.wait`` is
        else:
            self._scheduler.sleep(seconds)


class Scheduler:
    """Runs actors one at a time, in order of simulated wake-up time.

    >>> s = Scheduler()
    >>> p = s.new_process("p", "worker")
    >>> out = []
    >>> _ = s.spawn(p, "a", lambda: (s.sleep(2), out.append(("a", s.now))))
    >>> _ = s.spawn(p, "b", lambda: (s.sleep(1), out.append(("b", s.now))))
    >>> s.run(lambda: False, max_steps=100)
    >>> out
    [('b', 1.0), ('a', 2.0)]
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.steps = 0
        self.current: Actor | None = None
        self._heap: list[tuple[float, int, int, Actor]] = []
        self._order = itertools.count()
        self._main = getcurrent()
        self._processes: list[Process] = []
        self.on_error: Callable[[Actor, Exception], None] | None = None
        """Told when an actor raises (anything but a crash); unset, the error ends the run."""

    # -- processes and actors ----------------------------------------------

    def new_process(self, name: str, kind: str, clock_offset: float = 0.0) -> Process:
        process = Process(name, kind, clock_offset)
        self._processes.append(process)
        return process

    def clock(self, process: Process) -> ProcessClock:
        return ProcessClock(self, process.clock_offset)

    def spawn(
        self, process: Process, name: str, body: Callable[[], object], delay: float = 0.0
    ) -> Actor:
        """Start ``body`` as a new actor of ``process`` after ``delay`` simulated seconds."""
        actor = Actor(name, process)

        def run() -> None:
            try:
                body()
            except (Crash, GreenletExit):
                pass
            except Exception as exc:  # an actor's loop died: report it, the run goes on
                if self.on_error is None:
                    raise
                self.on_error(actor, exc)
            finally:
                actor.finished = True

        actor.task = greenlet(run, parent=self._main)
        process.actors.append(actor)
        self._push(actor, self.now + delay)
        return actor

    def crash(self, process: Process) -> None:
        """Kill every actor of ``process``; the caller, if one of them, unwinds with ``Crash``."""
        process.alive = False
        # The others die when next resumed (see ``run``): a greenlet killed
        # from here would hand control to the loop, not back to this actor.
        if self.current is not None and self.current.process is process:
            raise Crash(process.name)

    def freeze(self, process: Process, until: float) -> None:
        """Stop every actor of ``process`` until simulated time ``until``."""
        process.frozen_until = max(process.frozen_until, until)

    # -- inside an actor ---------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Give control back; resume ``seconds`` later (or when woken)."""
        actor = self.current
        if actor is None:
            raise RuntimeError("sleep() outside an actor")
        if not actor.process.alive:
            raise Crash(actor.process.name)
        self._push(actor, self.now + max(0.0, seconds))
        self._main.switch()
        if not actor.process.alive:
            raise Crash(actor.process.name)

    def wake(self, actor: Actor) -> None:
        """Resume a sleeping ``actor`` now instead of at its wake-up time."""
        if not actor.finished:
            self._push(actor, self.now)

    # -- the loop ----------------------------------------------------------

    def run(self, done: Callable[[], bool], *, max_steps: int, until: float = float("inf")) -> None:
        """Resume actors in time order until ``done()``, ``max_steps`` or time ``until``."""
        while self._heap and not done() and self.steps < max_steps:
            at, _, epoch, actor = heapq.heappop(self._heap)
            if epoch != actor.epoch or actor.finished:
                continue
            if at > until:
                self._push(actor, at)
                self.now = until
                return
            process = actor.process
            if not process.alive:
                self._kill(actor)
                continue
            if process.frozen_until > at:
                self._push(actor, process.frozen_until)
                continue
            self.now = max(self.now, at)
            self.current = actor
            assert actor.task is not None
            actor.task.switch()
            self.current = None
            self.steps += 1

    def shutdown(self) -> None:
        """Kill every actor still alive, so no greenlet outlives the run."""
        for process in self._processes:
            process.alive = False
            for actor in process.actors:
                self._kill(actor)
        self._heap.clear()

    def _kill(self, actor: Actor) -> None:
        if not actor.finished and actor.task is not None:
            actor.finished = True
            # The actor unwinds as itself (a ``finally`` of shipped code may reach for the
            # clock or the store): its process is dead, so its first wait or request raises.
            self.current = actor
            try:
                actor.task.throw(GreenletExit)
            finally:
                self.current = None

    def _push(self, actor: Actor, at: float) -> None:
        actor.epoch += 1
        heapq.heappush(self._heap, (at, next(self._order), actor.epoch, actor))


_FOREVER = 1e9


class SimEvent(threading.Event):
    """A ``threading.Event`` whose waits are the scheduler's: ``set`` wakes every waiting actor."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__()
        self._scheduler = scheduler
        self._waiting: list[Actor] = []
        """In the order they began to wait: a run is a function of its seed alone."""

    def set(self) -> None:
        super().set()
        for actor in list(self._waiting):
            self._scheduler.wake(actor)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait ``timeout`` simulated seconds (for ever if None) or until set."""
        if self.is_set():
            return True
        self.sleep(_FOREVER if timeout is None else timeout)
        return self.is_set()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the event is set meanwhile (``Clock.sleep``'s ``wake``)."""
        actor = self._scheduler.current
        assert actor is not None, "a simulated event is waited on inside an actor"
        self._waiting.append(actor)
        try:
            self._scheduler.sleep(seconds)
        finally:
            self._waiting.remove(actor)
