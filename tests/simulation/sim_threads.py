"""``pail.threads.ThreadFactory`` for the simulation: a thread is an actor of its process, an event wakes actors.

The shipped worker code (``pail.drain.supervise``, ``pail.message.Message``,
``pail.heartbeat.Heartbeat``) takes its threads and events from a
``ThreadFactory``; given this one, its handler thread and its heartbeat are actors
of the worker's simulated process (they crash and stall with it), and every
wait (``Event.wait(timeout)``, ``Clock.sleep(seconds, wake=event)``) is a
wait in simulated time that ``Event.set`` ends at once, as it would on a
real thread. Nothing blocks the OS thread: every actor is a greenlet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pail.threads import Started
from tests.simulation.scheduler import Actor, Process, Scheduler, SimEvent


class SimRLock:
    """``threading.RLock`` among actors: one holds it, the others wait in simulated time.

    Every actor is a greenlet of one OS thread, so a real ``RLock`` lets
    them all in at once (each is the thread that holds it). ``SimThreads.rlock``
    hands out this one where two actors of a process must exclude each other.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._owner: Actor | None = None
        self._depth = 0
        self._free = SimEvent(scheduler)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = self._scheduler.current
        while self._owner is not None and self._owner is not me:
            if not blocking:
                return False
            self._free.clear()
            self._free.wait()
        self._owner = me
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._free.set()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class SimThread:
    """A thread started by ``SimThreads``: an actor, and the actors waiting to join it."""

    def __init__(self, scheduler: Scheduler, done: SimEvent) -> None:
        self._scheduler = scheduler
        self._done = done
        self.actor: Actor | None = None

    def is_alive(self) -> bool:
        return not self._done.is_set() and not (self.actor is not None and self.actor.finished)

    def join(self) -> None:
        while self.is_alive():
            self._done.wait()


class SimThreads:
    """The threads of one simulated process (module docstring)."""

    def __init__(self, scheduler: Scheduler, process: Process) -> None:
        self._scheduler = scheduler
        self._process = process
        self._threads: dict[Actor, SimThread] = {}

    def event(self) -> threading.Event:
        return SimEvent(self._scheduler)

    def rlock(self) -> SimRLock:
        """A lock its actors exclude each other with (``SimRLock``)."""
        return SimRLock(self._scheduler)

    def start(self, target: Callable[[], None], name: str) -> Started:
        done = SimEvent(self._scheduler)
        thread = SimThread(self._scheduler, done)

        def run() -> None:
            try:
                target()
            finally:
                done.set()

        thread.actor = self._scheduler.spawn(self._process, f"{self._process.name}/{name}", run)
        self._threads[thread.actor] = thread
        return thread

    def current(self) -> object:
        actor = self._scheduler.current
        return self._threads.get(actor, actor) if actor is not None else None
