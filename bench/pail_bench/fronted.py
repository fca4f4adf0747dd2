"""The sections measured through a local S3 front: per-job latency (issue 17) and partitions (issue 16).

Runs in the orchestrator, beside ``scenarios``: it starts the fronts (threads
in this process) in front of the run's server and drives the driver
processes through them. The figures are made by ``report_latency`` and
``report_partitions``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from pail_bench.front import FixedDelay, Front
from pail_bench.partitions import Layout, PartitionPolicy, SplitRule
from pail_bench.plans import LOW_LATENCY_POLLING, PartitionPlan, PerJobPlan

SIDES = ("pail", "original")
ROOT = Path(__file__).resolve().parents[2]


class Driver(Protocol):
    """What a section needs of ``scenarios.Runner``: run one scenario for one side."""

    def drive(
        self, side: str, scenario: str, params: dict[str, Any], *, extra_buckets: int = 0
    ) -> dict[str, Any]: ...


def _port(endpoint_url: str) -> int:
    port = urlsplit(endpoint_url).port
    if port is None:
        raise ValueError(f"no port in {endpoint_url}")
    return port


def _stamp() -> dict[str, str]:
    return {"started": datetime.now(UTC).isoformat(timespec="seconds"), "git": git_state()}


def git_state() -> str:
    """The commit measured, and whether the runtime had uncommitted changes."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=30
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "runtime")
    return f"{commit} (runtime/ with uncommitted changes)" if dirty else commit


def per_job_section(
    runner: Driver, plan: PerJobPlan, endpoint_url: str, log: Callable[[str], None]
) -> dict[str, Any]:
    """Jobs at each delay, both queues, alternating; then idle latency at some delays.

    One front per delay, all started up front. Each round drives ours and
    the original once each (who goes first alternates); inside a run the
    delays take turns job by job (``per_job``), so drift in the machine's
    load spreads over delays and sides alike. The delay each
    front actually applied is recorded per run: on a loaded machine a sleep
    overshoots, and the round trips are counted in units of it.
    """
    out: dict[str, Any] = {**_stamp(), "plan": asdict(plan), "runs": {s: [] for s in SIDES}}
    delays = sorted(set(plan.delays_ms) | set(plan.idle_delays_ms))
    with ExitStack() as stack:
        fronts = {
            d: stack.enter_context(Front(_port(endpoint_url), FixedDelay(d / 1000))) for d in delays
        }
        endpoints = {f"{d:g}": fronts[d].endpoint_url for d in delays}
        for round_ in range(plan.rounds):
            shift = round_ % len(plan.delays_ms)
            order = plan.delays_ms[shift:] + plan.delays_ms[:shift]
            sides = SIDES if round_ % 2 == 0 else SIDES[::-1]
            for side in sides:
                before = {d: fronts[d].totals() for d in delays}
                result = runner.drive(
                    side,
                    "per_job",
                    {"jobs": plan.jobs, "order": order, "endpoints": endpoints},
                    extra_buckets=len(order),
                )
                result["applied_ms"] = _applied(fronts, before)
                result["round"] = round_
                out["runs"][side].append(result)
        if plan.idle_delays_ms:
            log("    idle enqueue -> handler start, through the fronts")
        out["idle"] = {s: [] for s in SIDES}
        for d in plan.idle_delays_ms:
            for side in SIDES:
                before = {d: fronts[d].totals()}
                result = runner.drive(
                    side,
                    "latency",
                    {
                        "samples": plan.idle_samples,
                        **LOW_LATENCY_POLLING,
                        "endpoint_url": fronts[d].endpoint_url,
                    },
                )
                result["delay_ms"] = d
                result["applied_ms"] = _applied({d: fronts[d]}, before)[f"{d:g}"]
                out["idle"][side].append(result)
    return out


def _applied(
    fronts: dict[float, Front], before: dict[float, tuple[int, float]]
) -> dict[str, float | None]:
    """The mean delay each front applied per request since ``before``, in ms."""
    out: dict[str, float | None] = {}
    for d, front in fronts.items():
        forwarded, seconds = front.totals()
        n = forwarded - before[d][0]
        out[f"{d:g}"] = round((seconds - before[d][1]) / n * 1000, 3) if n else None
    return out


def partition_layouts(plan: PartitionPlan) -> list[tuple[Layout, list[int], float]]:
    """Every (layout, worker counts, window) the plan measures, in order."""
    runs: list[tuple[Layout, list[int], float]] = []
    if plan.ceiling_workers:
        runs.append(
            (
                Layout("no limit (the server's ceiling)", scale=None),
                plan.ceiling_workers,
                plan.ceiling_window_seconds,
            )
        )
    runs.append((Layout("single prefix", scale=plan.scale), plan.workers, plan.window_seconds))
    if plan.split_workers:
        rule = SplitRule(sustain_seconds=plan.split_sustain_seconds)
        runs.append(
            (
                Layout("single prefix, hot partitions split", scale=plan.scale, split=rule),
                [plan.split_workers],
                plan.split_window_seconds,
            )
        )
    return runs


SHARD_PARTITIONS = r"regex:^(?:[a-z0-9_-]+/)?(?:queue|run|done|dlq)/(\d+)/"
"""One partition per shard (``{state}/{shard}/``), whatever the state; the flat keys share one."""


def shard_layouts(plan: PartitionPlan) -> list[tuple[Layout, list[int], float]]:
    """The ``shards`` section: each shard count at the same per-partition limit.

    Each shard is its own partition from the start: S3's state once it has
    split a sharded queue along its shard prefixes (``docs/scaling.md``).
    One shard is the flat layout in one partition, as in ``partition_layouts``.
    """
    runs: list[tuple[Layout, list[int], float]] = []
    for count in plan.shard_counts:
        if count == 1:
            layout = Layout("1 shard", scale=plan.scale)
        else:
            layout = Layout(
                f"{count} shards",
                scale=plan.scale,
                function=SHARD_PARTITIONS,
                connect={"shards": count},
            )
        runs.append((layout, plan.shard_workers, plan.shard_window_seconds))
    return runs


def partition_section(
    runner: Driver,
    plan: PartitionPlan,
    endpoint_url: str,
    log: Callable[[str], None],
    layouts: list[tuple[Layout, list[int], float]] | None = None,
) -> dict[str, Any]:
    """Steady jobs/s of ours, per layout and worker count, each run behind a fresh front.

    ``layouts`` defaults to the plan's (``partition_layouts``); a later
    sharded layout is measured by passing its own ``Layout`` (a key function
    and the ``connect`` options that make the runtime use it).
    """
    out: dict[str, Any] = {**_stamp(), "plan": asdict(plan), "layouts": []}
    for layout, workers_list, window in layouts or partition_layouts(plan):
        log(f"    layout: {layout.name}")
        runs = []
        for workers in workers_list:
            model = layout.model()
            started = time.perf_counter()
            with Front(_port(endpoint_url), PartitionPolicy(model)) as front:
                result = runner.drive(
                    "pail",
                    "steady",
                    {
                        "workers": workers,
                        "backlog": plan.backlog(workers),
                        "warmup_seconds": plan.warmup_seconds,
                        "window_seconds": window,
                        "endpoint_url": front.endpoint_url,
                        "connect": layout.connect,
                    },
                )
                result["front"] = dict(front.counts)
            result["model"] = model.snapshot() if model is not None else None
            result["wall_seconds"] = round(time.perf_counter() - started, 1)
            runs.append(result)
        out["layouts"].append({"layout": layout.to_json(), "runs": runs})
    return out
