"""Many seeds at once, spread over processes: what CI and ``scripts/simulate`` run.

Seeds are cut into chunks; each worker process simulates a chunk and sends
back only the totals and the reports of the seeds that failed, so a sweep's
cost is the simulation itself.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from tests.simulation.harness import model_named, run_seed

CHUNK = 250

SWEEP_TIMEOUT = 1800
"""The pytest-timeout of a sweep test: pytest's 300 s default stopped sweeps on a loaded
2-core machine (they are CPU-bound: their wall grows with the load). A sweep fails on an
invariant, never on time; this bound only stops a hang."""


@dataclass
class Sweep:
    """The totals of many runs, and the report of every one that failed."""

    seeds: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    failed_seeds: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, other: Sweep) -> None:
        self.seeds += other.seeds
        self.counts += other.counts
        self.faults += other.faults
        self.kinds += other.kinds
        self.failures += other.failures
        self.failed_seeds += other.failed_seeds

    def summary(self) -> str:
        """One paragraph of figures for logs and reports."""
        c = self.counts
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"
        return (
            f"{self.seeds} seeds in {self.seconds:.1f} s, {len(self.failed_seeds)} failed "
            f"{dict(self.kinds) if self.kinds else ''}\n"
            f"  jobs: {c['jobs_done']} done, {c['jobs_dead']} dead-lettered, lost 0 and stuck 0 "
            f"unless listed above\n"
            f"  requests {c['requests']}, faults injected: {faults}\n"
            f"  crashes {c['crashes']}, stalls {c['stalls']} ({c['stalls_long']} past the "
            f"lease, {c['stalls_short']} shorter), aimed at one request: "
            f"{c['aimed_long-stall']} long stalls, {c['aimed_short-stall']} short, "
            f"{c['aimed_crash']} crashes; late heartbeats {c['heartbeat_delays']}, "
            f"reaper passes {c['reaper_passes']}\n"
            f"  operators: {c['redrives']} redrives, {c['cancels']} cancels "
            f"({c['cancel_cancelled']} True), {c['status_reads']} status reads\n"
            f"  executions {c['executions']}: clean {c['executions_clean']}, cut short by a "
            f"crash {c['executions_crashed']}, lease lapsed mid-run (stall or late heartbeat) "
            f"{c['executions_lapsed']}; duplicates (runs beyond one per life) {c['duplicates']}; "
            f"started on a lease a cancel had just taken {c['started_as_cancelled']}"
        )


def _chunk(
    seeds: Sequence[int],
    model: str,
    chaos: bool,
    hostile: bool = False,
    sharded: bool = False,
    pausing: bool = False,
) -> Sweep:
    result = Sweep()
    chosen = model_named(model)
    for seed in seeds:
        outcome = run_seed(
            seed, chosen, chaos=chaos, hostile=hostile, sharded=sharded, pausing=pausing
        )
        result.seeds += 1
        result.counts += outcome.counts
        result.faults += outcome.faults
        if outcome.failed:
            result.failed_seeds.append(seed)
            result.failures.append(outcome.report())
            result.kinds.update(str(kind) for kind in outcome.kinds())
    return result


def chunks(seeds: range | Sequence[range], size: int = CHUNK) -> Iterator[range]:
    """``seeds`` cut into ranges of at most ``size``, in order.

    >>> list(chunks([range(0, 3), range(10, 12)], size=2))
    [range(0, 2), range(2, 3), range(10, 12)]
    """
    for part in [seeds] if isinstance(seeds, range) else seeds:
        for start in range(part.start, part.stop, size):
            yield range(start, min(start + size, part.stop))


def sweep(
    seeds: range | Sequence[range],
    *,
    model: str = "pail",
    chaos: bool = True,
    processes: int = 2,
    hostile: bool = False,
    sharded: bool = False,
    pausing: bool = False,
) -> Sweep:
    """Simulate every seed in ``seeds`` (a range, or several) on ``processes`` processes.

    ``hostile`` adds the foreign writers of ``tests/simulation/hostile.py``;
    ``sharded`` runs each seed on a sharded queue that grows (``harness.sharded_config``);
    ``pausing`` adds the pausing operator of ``tests/simulation/pausing.py``.

    >>> sweep(range(3), processes=1).failed_seeds
    []
    """
    began = time.perf_counter()
    total = Sweep()
    if processes <= 1:
        for chunk in chunks(seeds):
            total.add(_chunk(chunk, model, chaos, hostile, sharded, pausing))
    else:
        # spawn, not fork: the caller (pytest) may have threads running.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = [
                pool.submit(_chunk, chunk, model, chaos, hostile, sharded, pausing)
                for chunk in chunks(seeds)
            ]
            for future in futures:
                total.add(future.result())
    total.failed_seeds.sort()
    total.seconds = time.perf_counter() - began
    return total
