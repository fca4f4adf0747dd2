"""Threads, injected: how the worker starts its background threads and makes the events they wait on.

The worker runs a handler on a thread of its own (``pail.drain``) and renews
its lease on another (``pail.heartbeat``); both wait on ``threading.Event``s.
They take their threads and events from a ``ThreadFactory`` (default: the real
ones, ``SYSTEM_THREADS``), the way they take their time from a ``Clock``, so
that the deterministic simulation (``tests/simulation``) runs this very code
with its threads as simulated actors and its waits in simulated time,
instead of copies of it. Nothing else changes: the real ``ThreadFactory`` is
``threading.Thread`` and ``threading.Event``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class Started(Protocol):
    """A started thread, as its starter sees it."""

    def is_alive(self) -> bool:
        """False once its target returned (or raised)."""
        ...

    def join(self) -> None:
        """Wait until its target returned."""
        ...


class ThreadFactory(Protocol):
    """Where the runtime's background threads and their events come from."""

    def event(self) -> threading.Event:
        """A new, unset event (its ``wait``, ``set`` and ``is_set`` are all the runtime uses)."""
        ...

    def start(self, target: Callable[[], None], name: str) -> Started:
        """Run ``target`` on a new daemon thread named ``name``; return it, started."""
        ...

    def current(self) -> object:
        """The thread calling (compared with what ``start`` returned, never inspected)."""
        ...


class SystemThreads:
    """The real threads: ``threading.Thread`` (daemon) and ``threading.Event``."""

    def event(self) -> threading.Event:
        return threading.Event()

    def start(self, target: Callable[[], None], name: str) -> Started:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def current(self) -> object:
        return threading.current_thread()


SYSTEM_THREADS: ThreadFactory = SystemThreads()
"""The default of every ``threads=`` parameter."""
