"""What both sides of the benchmark share inside a driver process: the queue, its counter, the handler.

Runs in the project's venv and in the original's (see ``driver``); imports
only the standard library, boto3 and whichever ``pail`` the interpreter has.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import statistics
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pail_bench.counting import RequestCounter, by_operation

ORIGINAL_VERSION = "0.1.1"
SEED_THREADS = 8
IDLE_WAIT = 0.05
"""How long a benchmark worker loop waits after finding no job (both sides)."""

Params = dict[str, Any]
Result = dict[str, Any]


class Side:
    """The queue implementation this interpreter imports, and its request counter."""

    def __init__(self, connect: dict[str, str]) -> None:
        self.pail: Any = importlib.import_module("pail")
        self.version = importlib.metadata.version("pailq")
        self.original = self.version == ORIGINAL_VERSION
        self.name = "original" if self.original else "pail"
        self.counter = RequestCounter()
        self._connect = connect

    def queue(
        self,
        bucket: str,
        *,
        counter: RequestCounter | None = None,
        endpoint_url: str | None = None,
        options: Params | None = None,
    ) -> Any:
        """A new queue object with its own boto3 client, counted by ``counter``.

        ``endpoint_url`` replaces the server's (a front in front of it);
        ``options`` are extra ``Pail.connect`` keyword arguments (ours only).
        """
        counter = counter or self.counter
        kw = self._connect
        endpoint = endpoint_url or kw["endpoint_url"]
        if self.original:
            import boto3

            if options:
                raise ValueError(f"the original takes no connect options, got {options}")
            boto3.setup_default_session()
            assert boto3.DEFAULT_SESSION is not None
            counter.attach(boto3.DEFAULT_SESSION.events)
            return self.pail.Pail.connect(
                bucket,
                endpoint_url=endpoint,
                access_key_id=kw["access_key_id"],
                secret_access_key=kw["secret_access_key"],
                region=kw["region"],
            )
        build_client = importlib.import_module("pail.store.client").build_client
        client = build_client(
            endpoint_url=endpoint,
            access_key_id=kw["access_key_id"],
            secret_access_key=kw["secret_access_key"],
            region=kw["region"],
        )
        counter.attach(client.meta.events)
        return self.pail.Pail.connect(bucket, client=client, **(options or {}))

    def raw_client(self, threads: int = 16) -> Any:
        """A plain boto3 S3 client for this server (for the server's own figures)."""
        import boto3
        from botocore.config import Config

        kw = self._connect
        return boto3.client(
            "s3",
            endpoint_url=kw["endpoint_url"],
            aws_access_key_id=kw["access_key_id"],
            aws_secret_access_key=kw["secret_access_key"],
            region_name=kw["region"],
            config=Config(max_pool_connections=threads, s3={"addressing_style": "path"}),
        )


class Executions:
    """Every run of the handler, by job number, so duplicates can be counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: Counter[int] = Counter()

    def handler(self, payload: Any) -> dict[str, Any]:
        with self._lock:
            self.runs[int(payload["job"])] += 1
        return {"ok": True}

    def unique(self) -> int:
        with self._lock:
            return len(self.runs)

    def duplicates(self) -> int:
        """Executions beyond the first, summed over jobs."""
        with self._lock:
            return sum(n - 1 for n in self.runs.values() if n > 1)


def seed(side: Side, bucket: str, first: int, count: int) -> None:
    """Enqueue jobs ``first .. first + count - 1`` through the queue's own ``enqueue``.

    ``SEED_THREADS`` threads share one queue object and its client (boto3's clients are
    thread-safe, and each side's ``enqueue`` is one conditional PUT through it): a client
    each cost a boto3 session or client per thread, about 0.2 CPU seconds apiece for the
    original, for no figure (seeding is counted, never timed).
    """
    if count <= 0:
        return
    queue = side.queue(bucket)

    def enqueue_slice(index: int) -> None:
        for job in range(first + index, first + count, SEED_THREADS):
            queue.enqueue({"job": job})

    with ThreadPoolExecutor(SEED_THREADS) as pool:
        list(pool.map(enqueue_slice, range(SEED_THREADS)))


def per(counts: dict[str, int], n: int) -> dict[str, float]:
    return {op: round(v / n, 4) for op, v in by_operation(counts).items()} if n else {}


def add(into: dict[str, int], more: dict[str, int]) -> None:
    for key, n in more.items():
        into[key] = into.get(key, 0) + n


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile by nearest rank: a value that was measured, never interpolated."""
    if q == 0.5:
        return statistics.median(values)
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
