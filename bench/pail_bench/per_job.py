"""Per-job time of one worker in a ``work_once`` loop, at several added delays per request.

The orchestrator runs one front per delay (``pail_bench.front.FixedDelay``)
in front of the same server. Each delay has its own bucket and its own
worker, which talks to the server through the front for that delay; jobs
are enqueued straight to the server beforehand, so only the worker's
requests are delayed and timed. If every request of a job ran one after
another, a job would take ``requests x d`` longer at delay ``d``; what it
takes longer, divided by ``d``, is the number of sequential round trips on
its critical path.

The delays take turns job by job (0, 5, 20, 50, then 5, 20, 50, 0, ...), so
a change in the machine's load, which moves a job's time by tens of
milliseconds here, falls on every delay alike.

Imports only the standard library, boto3 and whichever ``pail`` this
interpreter has (it runs for the original too).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from pail_bench.counting import RequestCounter, diff, total
from pail_bench.sides import Executions, Params, Result, Side


class _Lane:
    """One delay: its bucket, its worker behind the front, and what its timed jobs took."""

    def __init__(
        self, side: Side, bucket: str, endpoint: str, runs: Executions, numbers: Iterator[int]
    ) -> None:
        self.counter = RequestCounter()
        self.producer = side.queue(bucket, counter=RequestCounter())
        self.worker = side.queue(bucket, counter=self.counter, endpoint_url=endpoint)
        self.runs = runs
        self.seconds: list[float] = []
        self.counts: dict[str, int] = {}
        self._start: dict[str, int] = {}
        self._numbers = numbers
        """Job numbers, shared by every lane, so a job run twice shows as a duplicate."""

    def enqueue(self, count: int) -> None:
        for _ in range(count):
            self.producer.enqueue({"job": next(self._numbers)})

    def warm(self) -> None:
        """One untimed job: the client's first request, and the original's first reclaim LIST."""
        self.enqueue(1)
        if not self.worker.work_once(self.runs.handler):
            raise RuntimeError("the warm-up job was not claimed")
        flush(self.worker)
        self._start = self.counter.snapshot()

    def timed_job(self) -> None:
        started = time.perf_counter()
        if not self.worker.work_once(self.runs.handler):
            raise RuntimeError("the queue ran dry")
        self.seconds.append(time.perf_counter() - started)

    def finish(self) -> None:
        """Count every request of the timed jobs, those that landed after a job's time ended too."""
        flush(self.worker)
        self.counts = diff(self.counter.snapshot(), self._start)


def flush(queue: Any) -> None:
    """Let the requests a job left in flight land (pail's lease removal); the original has none."""
    wait = getattr(queue, "flush", None)
    if wait is not None:
        wait()


def per_job(side: Side, bucket: str, p: Params) -> Result:
    """``jobs`` timed jobs at each delay in ``order``, the delays taking turns job by job.

    ``endpoints`` maps each delay (ms, formatted ``f"{d:g}"``) to its front;
    delay ``order[i]`` uses bucket ``{bucket}-{i}``. Each lane is warmed by
    one untimed job, then given all its jobs at once, so its first timed
    claim lists the queue (ours: one LIST serves a page of up to 1,000
    claims) and the LIST is spread over the lane's jobs, as in a drain.
    """
    n = int(p["jobs"])
    runs = Executions()
    numbers = itertools.count()
    keys = [f"{float(d):g}" for d in p["order"]]
    lanes: dict[str, _Lane] = {}
    for index, key in enumerate(keys):
        lanes[key] = _Lane(side, f"{bucket}-{index}", p["endpoints"][key], runs, numbers)
        lanes[key].warm()
        lanes[key].enqueue(n)
    for job in range(n):
        shift = job % len(keys)
        for key in keys[shift:] + keys[:shift]:
            lanes[key].timed_job()
    for lane in lanes.values():
        lane.finish()
    return {
        "jobs": n,
        "lanes": [_lane_json(float(key), lane) for key, lane in lanes.items()],
        "executions": sum(runs.runs.values()),
        "unique_executed": runs.unique(),
        "duplicates": runs.duplicates(),
    }


def _lane_json(delay: float, lane: _Lane) -> dict[str, Any]:
    n = len(lane.seconds)
    return {
        "delay_ms": delay,
        "jobs": n,
        "ms": [round(s * 1000, 3) for s in lane.seconds],
        "ms_per_job": round(sum(lane.seconds) / n * 1000, 3),
        "requests": lane.counts,
        "requests_per_job": round(total(lane.counts) / n, 3),
    }
