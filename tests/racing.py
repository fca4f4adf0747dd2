"""Make threads really race: every attempt starts at one barrier.

Used by the atomicity tests of the servers and by the contract suite's
store-level races. Threads come from one executor per test; a round submits
exactly ``parties`` attempts that all block on the barrier, so the executor
must run them on ``parties`` distinct threads, and they are released together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

BARRIER_TIMEOUT = 60.0


def race[T](executor: ThreadPoolExecutor, parties: int, attempt: Callable[[int], T]) -> list[T]:
    """Run ``attempt(i)`` for ``i`` in ``range(parties)`` at once; results in order.

    An exception in any attempt is re-raised here, in the calling thread. The
    barrier times out (BrokenBarrierError) rather than hang if the executor
    has fewer than ``parties`` threads.
    """
    barrier = threading.Barrier(parties, timeout=BARRIER_TIMEOUT)

    def run(index: int) -> T:
        barrier.wait()
        return attempt(index)

    futures = [executor.submit(run, index) for index in range(parties)]
    return [future.result() for future in futures]
