"""A fault-injecting HTTP proxy on loopback, between S3 clients and the local S3 server.

For a configurable fraction of requests it does one of:

* **drop before:** closes the client's connection without forwarding (nothing applied);
* **drop after:** forwards the request, then closes the client's connection
  without the response (the request was applied; the client sees a broken
  connection and resends it, as after a timeout);
* **503 SlowDown:** answers S3's throttling error itself (nothing applied);
* **delay:** forwards, then holds the response back for up to ``max_delay`` seconds.

It is a policy of the relay core (``tests.support.relay``): one request per
connection, relayed byte for byte, on 127.0.0.1 to its one upstream port.
"""

from __future__ import annotations

import random
import time
from enum import StrEnum

from tests.support.relay import Exchange, Relay, s3_error

_SLOWDOWN = s3_error(503, "Slow Down", "SlowDown", "Please reduce your request rate.")


class ProxyFault(StrEnum):
    DROP_BEFORE = "drop-before-forwarding"
    DROP_AFTER = "drop-after-forwarding"
    SLOWDOWN = "503-slowdown"
    DELAY = "delayed-response"


class FaultProxy(Relay):
    """``with FaultProxy(upstream_port, fault_rate=0.05) as proxy:`` then use ``proxy.endpoint_url``."""

    name = "fault-proxy"

    def __init__(
        self,
        upstream_port: int,
        *,
        fault_rate: float = 0.05,
        max_delay: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(upstream_port)
        self.fault_rate = fault_rate
        self.max_delay = max_delay
        self._rng = random.Random(seed)

    def _decide(self) -> tuple[ProxyFault | None, float]:
        with self._lock:
            self.counts["requests"] += 1
            if self._rng.random() >= self.fault_rate:
                return None, 0.0
            fault = self._rng.choice(list(ProxyFault))
            self.counts[fault] += 1
            return fault, self._rng.uniform(0.05, self.max_delay)

    def handle(self, exchange: Exchange) -> None:
        fault, delay = self._decide()
        exchange.reset = fault in (ProxyFault.DROP_BEFORE, ProxyFault.DROP_AFTER)
        if fault is ProxyFault.DROP_BEFORE:
            return
        if fault is ProxyFault.SLOWDOWN:
            exchange.reply(_SLOWDOWN)
            return
        response = exchange.forward()
        if fault is ProxyFault.DROP_AFTER:
            return
        if fault is ProxyFault.DELAY:
            time.sleep(delay)  # the fault itself: a slow network, not a wait for anything
        exchange.reply(response)
