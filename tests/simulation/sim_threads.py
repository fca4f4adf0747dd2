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
