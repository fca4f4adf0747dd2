"""How long a failed job waits before its retry: the ``RetryPolicy`` value object.

The default is no wait: a failed attempt's job is pending again at once, as
in pailq 0.1.1. With a backoff, the owner records the decision in its lease
(state ``retrying`` with ``retry_after`` seconds) and stops there; the
reaper requeues the job once the lease is older than that, judged by the
server's clock like any expiry (``docs/protocol.md``, "Retry backoff").
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from pail.bounds import MAX_RETRY_DELAY, validate_count, validate_seconds
from pail.errors import ConfigurationError

MAX_FACTOR = 100.0
"""The largest growth between two retries' waits."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff between attempts: ``base * factor ** (attempt - 1)``, capped, minus jitter.

    ``jitter`` is the fraction of each delay that is random (0 = exact,
    1 = anywhere from 0 to the delay), spreading the retries of jobs that
    failed together. The random part is a hash of the job id and attempt, so
    a retry's delay is the same whoever computes it.

    >>> policy = RetryPolicy.exponential(10, max_delay=60)
    >>> [policy.delay(n) for n in (1, 2, 3, 4)]
    [10.0, 20.0, 40.0, 60.0]
    >>> RetryPolicy.fixed(30).delay(5)
    30.0
    """

    base: float = 0.0
    factor: float = 1.0
    max_delay: float = 3600.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        # Checked here, once: delay() then never meets a value it cannot compute.
        validate_seconds("retry base delay", self.base, maximum=MAX_RETRY_DELAY)
        validate_seconds("retry max_delay", self.max_delay, maximum=MAX_RETRY_DELAY)
        if (
            isinstance(self.factor, bool)
            or not isinstance(self.factor, int | float)
            or not (1 <= self.factor <= MAX_FACTOR)
        ):
            raise ConfigurationError(
                f"backoff factor must be from 1 to {MAX_FACTOR}, got {self.factor!r}"
            )
        if (
            isinstance(self.jitter, bool)
            or not isinstance(self.jitter, int | float)
            or not (0 <= self.jitter <= 1)
        ):
            raise ConfigurationError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    @classmethod
    def immediate(cls) -> RetryPolicy:
        """No wait: the default."""
        return cls()

    @classmethod
    def fixed(cls, seconds: float, *, jitter: float = 0.0) -> RetryPolicy:
        """The same wait before every retry."""
        return cls(base=seconds, factor=1.0, max_delay=seconds, jitter=jitter)

    @classmethod
    def exponential(
        cls, base: float, *, factor: float = 2.0, max_delay: float = 3600.0, jitter: float = 0.0
    ) -> RetryPolicy:
        """``base`` seconds before the first retry, ``factor`` times more before each next one."""
        return cls(base=base, factor=factor, max_delay=max_delay, jitter=jitter)

    def delay(self, attempt: int, job_id: str = "") -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) of ``job_id``.

        Never more than ``max_delay``, however large ``attempt`` (no overflow).
        """
        validate_count("attempt", attempt)
        if self.base <= 0:
            return 0.0
        raw = min(self.max_delay, self._grown(max(0, attempt - 1)))
        if not self.jitter:
            return float(raw)
        digest = hashlib.sha256(f"{job_id}:{attempt}".encode(errors="replace")).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64
        return float(raw * (1 - self.jitter * unit))

    def _grown(self, steps: int) -> float:
        """``base * factor ** steps``, or ``max_delay`` once that is surely past it."""
        if self.factor == 1 or self.max_delay <= self.base:
            return float(self.base)
        # Compare in logarithms: factor ** steps overflows a float long before
        # steps runs out (1026 steps of 2 do).
        room = math.log(self.max_delay / self.base) / math.log(self.factor)
        if steps >= room:
            return float(self.max_delay)
        return float(self.base * self.factor**steps)
