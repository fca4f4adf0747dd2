"""Count S3 requests by operation and HTTP status, with a botocore event hook.

Attach a ``RequestCounter`` to any boto3 S3 client; it records every HTTP
attempt the client makes, retries included (S3 bills each one, a failed
conditional write too), so tests can assert request budgets without mocking
anything. An attempt that got no HTTP response at all is recorded with
status 0. ``bench/pail_bench/counting.py`` counts the same event for the
benchmark's tables.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

NO_RESPONSE = 0
"""The status recorded for an attempt that got no HTTP response (a reset, a timeout)."""


class RequestCounter:
    """Thread-safe tallies of (operation, status) for the clients it is attached to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, int]] = Counter()

    def attach(self, client: Any) -> Any:
        """Count ``client``'s requests from now on; returns ``client``."""
        # needs-retry fires once per HTTP attempt, before botocore decides to retry it.
        client.meta.events.register(
            "needs-retry.s3", self._attempted, unique_id=f"tests-request-counter-{id(self)}"
        )
        return client

    def _attempted(self, response: Any = None, operation: Any = None, **_: Any) -> None:
        status = NO_RESPONSE if response is None else int(response[0].status_code)
        with self._lock:
            self.calls[(operation.name, status)] += 1

    def total(self, operation: str | None = None, status: int | None = None) -> int:
        """Requests sent so far, of ``operation`` and with ``status`` when given."""
        with self._lock:
            return sum(
                n
                for (op, code), n in self.calls.items()
                if (operation is None or op == operation) and (status is None or code == status)
            )

    @property
    def by_operation(self) -> Counter[str]:
        """Requests sent so far by operation, whatever their status."""
        with self._lock:
            tally: Counter[str] = Counter()
            for (op, _), n in self.calls.items():
                tally[op] += n
            return tally

    def failed_conditional_writes(self) -> int:
        """412s on PUT or DELETE: conditional writes that lost (billed on S3 all the same)."""
        return self.total("PutObject", 412) + self.total("DeleteObject", 412)
