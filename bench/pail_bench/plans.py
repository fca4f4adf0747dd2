"""How big each scenario is, in the full run and in the quick (CI) run.

The full run follows issue 7's figures: backlogs of 100 to 10,000, 400 jobs
raced by 1 to 32 workers, a 60 s idle window. The original is slow where its
claims list the whole queue, so its scenarios stop at a time cap and report
per-claim figures over the claims it made by then; ours run to the end.
Issue 17's per-job latency and issue 16's partition model have plans of
their own (``PerJobPlan``, ``PartitionPlan``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class PerJobPlan:
    """Per-job time of one worker at added delays per request, both queues (issue 17)."""

    delays_ms: list[float]
    jobs: int
    """Timed jobs per delay per run; the delays take turns job by job."""
    rounds: int
    """Rounds of (ours, then the original, or the other way round), alternating who goes first."""
    idle_delays_ms: list[float]
    """Delays at which enqueue -> handler start is measured for an idle worker."""
    idle_samples: int


@dataclass(frozen=True)
class PartitionPlan:
    """Jobs/s against workers through the partition model (issue 16; see docs/scaling.md)."""

    scale: float
    """AWS's per-partition rates (3,500 writes/s, 5,500 reads/s) are divided by this."""
    ceiling_workers: list[int]
    """Worker counts measured through a front with no limit: the server's own ceiling."""
    workers: list[int]
    """Worker counts measured on today's single-prefix layout, one partition."""
    warmup_seconds: float
    window_seconds: float
    ceiling_window_seconds: float
    split_workers: int | None = None
    """Workers for the run in which hot partitions split (None: no such run)."""
    split_window_seconds: float = 0.0
    split_sustain_seconds: int = 10
    min_backlog: int = 32
    shard_counts: list[int] = field(default_factory=list)
    """Shard counts the ``shards`` section measures, each shard its own partition (1: one prefix)."""
    shard_workers: list[int] = field(default_factory=list)
    """Worker counts measured for each shard count."""
    shard_window_seconds: float = 0.0

    def backlog(self, workers: int) -> int:
        """Jobs kept waiting: enough that racing workers rarely pick a job another just took."""
        return max(self.min_backlog, 8 * workers)


PAIL_DEFAULT_POLLING = {"floor": 0.1, "ceiling": 20.0}
"""``Pail.work``'s own defaults: 0.1 s after a job, doubling to 20 s while idle."""
LOW_LATENCY_POLLING = {"floor": 0.05, "ceiling": 0.1}
"""The setting measured for enqueue-to-claim latency (the target is a p50 of 100 ms)."""
ORIGINAL_DEFAULT_POLL = 20.0


@dataclass(frozen=True)
class Plan:
    name: str
    ceiling_threads: list[int]
    ceiling_seconds: float
    list_sizes: list[int]
    list_max_keys: int
    list_repeats: int
    backlogs: list[int]
    pail_claims: list[int]
    original_claims: list[int]
    claim_cap_seconds: float
    contention_workers: list[int]
    contention_jobs: int
    pail_contention_cap: float
    original_contention_cap: float
    latency_samples: int
    idle_seconds: float
    second_server: bool
    cost_backlog: int
    per_job: PerJobPlan
    partitions: PartitionPlan
    throughput_workers: int = 16
    latency_polling: dict[str, float] = field(default_factory=lambda: dict(LOW_LATENCY_POLLING))

    def idle_settings(self, side: str) -> list[dict[str, Any]]:
        """The polling settings whose idle cost is measured, per side."""
        if side == "original":
            return [
                {"name": "default (20 s poll)", "floor": 0.0, "ceiling": ORIGINAL_DEFAULT_POLL},
                {
                    "name": f"{self.latency_polling['ceiling']} s poll",
                    "floor": 0.0,
                    "ceiling": self.latency_polling["ceiling"],
                },
            ]
        low = self.latency_polling
        return [
            {"name": "default (0.1 s → 20 s)", **PAIL_DEFAULT_POLLING},
            {"name": f"low latency ({low['floor']} s → {low['ceiling']} s)", **low},
        ]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FULL = Plan(
    name="full",
    ceiling_threads=[1, 16],
    ceiling_seconds=1.0,
    list_sizes=[100, 3000],
    list_max_keys=50,
    list_repeats=30,
    backlogs=[100, 1000, 5000, 10000],
    pail_claims=[150, 150, 150, 150],
    original_claims=[30, 12, 6, 4],
    claim_cap_seconds=15.0,
    contention_workers=[1, 4, 16, 32],
    contention_jobs=400,
    pail_contention_cap=120.0,
    original_contention_cap=15.0,
    latency_samples=40,
    idle_seconds=60.0,
    second_server=True,
    cost_backlog=5000,
    per_job=PerJobPlan(
        delays_ms=[0, 5, 20, 50],
        jobs=20,
        rounds=3,
        idle_delays_ms=[0, 20],
        idle_samples=10,
    ),
    partitions=PartitionPlan(
        scale=1000,
        ceiling_workers=[1, 4, 16],
        workers=[1, 4, 16],
        warmup_seconds=5,
        window_seconds=40,
        ceiling_window_seconds=12,
        split_workers=16,
        split_window_seconds=100,
        split_sustain_seconds=10,
        shard_counts=[1, 4, 16],
        shard_workers=[4, 16, 32],
        shard_window_seconds=30,
    ),
)

QUICK = Plan(
    name="quick",
    ceiling_threads=[4],
    ceiling_seconds=0.2,
    list_sizes=[50, 200],
    list_max_keys=50,
    list_repeats=5,
    backlogs=[20, 200],
    pail_claims=[15, 15],
    original_claims=[3, 3],
    claim_cap_seconds=2.0,
    contention_workers=[1, 8],
    contention_jobs=32,
    pail_contention_cap=20.0,
    original_contention_cap=1.0,
    latency_samples=5,
    idle_seconds=2.0,
    second_server=False,
    cost_backlog=200,
    throughput_workers=8,
    per_job=PerJobPlan(delays_ms=[0, 20], jobs=3, rounds=1, idle_delays_ms=[], idle_samples=0),
    partitions=PartitionPlan(
        scale=250,
        ceiling_workers=[],
        workers=[2],
        warmup_seconds=0.3,
        window_seconds=1,
        ceiling_window_seconds=0,
        min_backlog=8,
        shard_counts=[1, 4],
        shard_workers=[2],
        shard_window_seconds=1,
    ),
)
