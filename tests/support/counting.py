"""Count S3 requests by operation and HTTP status, with botocore event hooks.

Attach a ``RequestCounter`` to any boto3 S3 client; it records every request
the client sends (retries included), so tests can assert request budgets
without mocking anything.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class RequestCounter:
    """Thread-safe tallies of (operation, status) for the clients it is attached to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, int]] = Counter()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("after-call.s3", self._after_call)
        return client

    def _after_call(self, http_response: Any, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[(model.name, int(http_response.status_code))] += 1

    def total(self, operation: str | None = None, status: int | None = None) -> int:
        with self._lock:
            return sum(
                n
                for (op, code), n in self.calls.items()
                if (operation is None or op == operation) and (status is None or code == status)
            )

    def failed_conditional_writes(self) -> int:
        """412s on PUT or DELETE: conditional writes that lost (billed on S3 all the same)."""
        return self.total("PutObject", 412) + self.total("DeleteObject", 412)
