"""An HTTP proxy on loopback that does to each S3 request what the test's script says.

Where the chaos proxy injects faults at random, this one is told exactly which
request to drop, hold or let through, so a test can put a fault or a signal at
one step of the protocol:

* ``FORWARD``: relay the request and its response;
* ``DROP_BEFORE``: reset the client's connection without forwarding (nothing applied);
* ``DROP_AFTER``: forward, then reset the connection without the response (applied,
  but the client never learns it);
* ``HOLD``: wait until the test calls ``release()`` (``held`` is set meanwhile), then forward.

The script is a function of the request (``Request``: method, bucket-relative
key, query string); it may keep state. It is a policy of the relay core
(``tests.support.relay``): one request per connection, relayed byte for byte,
on 127.0.0.1 to its one upstream port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from pail import Pail
from tests.support.queues import connect_to, local_kwargs
from tests.support.relay import Exchange, Relay, Request

__all__ = ["HOLD_LIMIT", "Action", "Request", "Script", "ScriptedProxy", "connect_through"]

HOLD_LIMIT = 60.0
"""Seconds a held request waits for ``release()`` before it is forwarded anyway."""


class Action(StrEnum):
    FORWARD = "forward"
    DROP_BEFORE = "drop-before"
    DROP_AFTER = "drop-after"
    HOLD = "hold"


Script = Callable[[Request], Action]


def forward_all(request: Request) -> Action:
    return Action.FORWARD


class ScriptedProxy(Relay):
    """``with ScriptedProxy(upstream_port) as proxy:``; set ``proxy.script``; use ``proxy.endpoint_url``."""

    name = "scripted-proxy"

    def __init__(self, upstream_port: int, script: Script = forward_all) -> None:
        super().__init__(upstream_port)
        self.script = script
        self.held = threading.Event()
        self._release = threading.Event()

    def release(self) -> None:
        """Let held requests (and any held later) through."""
        self._release.set()

    def stop(self) -> None:
        self._release.set()
        super().stop()

    def handle(self, exchange: Exchange) -> None:
        action = self.script(exchange.request)
        self.count(action)
        exchange.reset = action in (Action.DROP_BEFORE, Action.DROP_AFTER)
        if action is Action.DROP_BEFORE:
            return
        if action is Action.HOLD:
            self.held.set()
            self._release.wait(HOLD_LIMIT)
        response = exchange.forward()
        if action is not Action.DROP_AFTER:
            exchange.reply(response)


def connect_through(proxy: ScriptedProxy, bucket: str, **options: Any) -> Pail:
    """A ``Pail`` on the local server's ``bucket`` whose every request goes through ``proxy``."""
    return connect_to(local_kwargs(proxy.endpoint_url), bucket, **options)
