"""Holding chosen requests on the wire: how a test proves two requests travel at once.

A botocore ``before-send`` hook waits, bounded, on an event before a chosen
request leaves: a request held until another one has been sent shows that
the two were in flight together; held until the test says so, that nobody
waited for it.
"""

from __future__ import annotations

import threading
from typing import Any

WAIT = 5.0
"""Bound on a held request's wait: reached only when the order under test is broken."""


class Wire:
    """Holds chosen requests until a condition, and says whether they were released in time.

    Attach it to the client of a queue of the test's own (``tests.support.queues.connect_to``).
    """

    def __init__(self, client: Any) -> None:
        self._lock = threading.Lock()
        self.sent: list[tuple[str, str]] = []
        self._rules: list[tuple[str, str, threading.Event, list[bool], float]] = []
        self._signals: list[tuple[str, str, threading.Event]] = []
        client.meta.events.register("before-send.s3", self._before_send)

    def signal(self, method: str, path: str) -> threading.Event:
        """An event set when a request ``method`` to a key containing ``path`` is sent."""
        event = threading.Event()
        self._signals.append((method, path, event))
        return event

    def hold(
        self, method: str, path: str, until: threading.Event, wait: float = WAIT
    ) -> list[bool]:
        """Hold such requests until ``until`` is set (at most ``wait`` s); each wait's result."""
        released: list[bool] = []
        self._rules.append((method, path, until, released, wait))
        return released

    def _before_send(self, request: Any, **_: Any) -> None:
        method, url = request.method, request.url
        with self._lock:
            self.sent.append((method, url))
        for want, path, event in self._signals:
            if method == want and path in url:
                event.set()
        for want, path, until, released, wait in self._rules:
            if method == want and path in url:
                released.append(until.wait(wait))
