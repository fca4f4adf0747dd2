"""Counting S3 requests by operation and HTTP status, with botocore event hooks.

Both queues are counted the same way: a handler on ``needs-retry.s3`` sees
every HTTP attempt a client makes, retries included, before botocore decides
whether to retry it. S3 bills every attempt, a failed conditional write (412)
too, so that is the unit counted here.

This module imports nothing but the standard library: it runs inside the
original pailq's virtualenv as well as ours.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

EVENT = "needs-retry.s3"
NETWORK_ERROR = 0
"""The status recorded for an attempt that got no HTTP response at all."""

# S3 Standard request prices, us-east-1, in dollars per request.
PRICE_WRITE = 0.005 / 1000  # PUT, COPY, POST, LIST
PRICE_READ = 0.0004 / 1000  # GET, HEAD
PRICES = {
    "PutObject": PRICE_WRITE,
    "CopyObject": PRICE_WRITE,
    "ListObjectsV2": PRICE_WRITE,
    "ListObjects": PRICE_WRITE,
    "GetObject": PRICE_READ,
    "HeadObject": PRICE_READ,
    "DeleteObject": 0.0,
}
CONDITIONAL_WRITES = ("PutObject", "DeleteObject")


class RequestCounter:
    """Thread-safe tallies of ``(operation, status)`` over every client it is attached to.

    >>> counter = RequestCounter()
    >>> counter.record("PutObject", 412)
    >>> counter.snapshot()
    {'PutObject 412': 1}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[tuple[str, int]] = Counter()

    def attach(self, events: Any) -> None:
        """Count the requests of every client that uses ``events``.

        ``events`` is a client's ``client.meta.events``, or a session's
        ``events`` before it creates clients (they copy its handlers).
        """
        events.register(EVENT, self._on_attempt, unique_id=f"pail-bench-{id(self)}")

    def _on_attempt(self, response: Any = None, operation: Any = None, **_: Any) -> None:
        status = NETWORK_ERROR if response is None else int(response[0].status_code)
        self.record(operation.name if operation is not None else "?", status)

    def record(self, operation: str, status: int) -> None:
        with self._lock:
            self._calls[(operation, status)] += 1

    def snapshot(self) -> dict[str, int]:
        """The counts so far as ``{"Operation status": n}``, sorted (JSON-friendly)."""
        with self._lock:
            return {f"{op} {status}": n for (op, status), n in sorted(self._calls.items())}


def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """The requests made between two snapshots.

    >>> diff({"GetObject 200": 5, "PutObject 200": 2}, {"GetObject 200": 3})
    {'GetObject 200': 2, 'PutObject 200': 2}
    """
    out = {key: n - before.get(key, 0) for key, n in after.items()}
    return {key: n for key, n in out.items() if n}


def by_operation(counts: dict[str, int]) -> dict[str, int]:
    """Sum the statuses away: ``{"PutObject": n, ...}``."""
    out: Counter[str] = Counter()
    for key, n in counts.items():
        out[key.split(" ", 1)[0]] += n
    return dict(sorted(out.items()))


def total(counts: dict[str, int], operation: str | None = None) -> int:
    return sum(n for op, n in by_operation(counts).items() if operation in (None, op))


def failed_conditions(counts: dict[str, int]) -> int:
    """Writes that lost their condition: 412 on PUT or DELETE."""
    return sum(counts.get(f"{op} 412", 0) for op in CONDITIONAL_WRITES)


def dollars(counts: dict[str, int]) -> float:
    """What these requests cost at S3 Standard prices (unknown operations at the PUT price)."""
    return sum(n * PRICES.get(op, PRICE_WRITE) for op, n in by_operation(counts).items())
