"""How big each scenario is, in the full run and in the quick (CI) run.

The full run follows issue 7's figures: backlogs of 100 to 10,000, 400 jobs
raced by 1 to 32 workers, a 60 s idle window. The original is slow where its
claims list the whole queue, so its scenarios stop at a time cap and report
per-claim figures over the claims it made by then; ours run to the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
        return dict(self.__dict__)


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
)

QUICK = Plan(
    name="quick",
    ceiling_threads=[4],
    ceiling_seconds=0.2,
    list_sizes=[50, 200],
    list_max_keys=50,
    list_repeats=5,
    backlogs=[20, 200],
    pail_claims=[25, 25],
    original_claims=[3, 3],
    claim_cap_seconds=2.0,
    contention_workers=[1, 8],
    contention_jobs=32,
    pail_contention_cap=20.0,
    original_contention_cap=2.0,
    latency_samples=5,
    idle_seconds=2.0,
    second_server=False,
    cost_backlog=200,
    throughput_workers=8,
)
