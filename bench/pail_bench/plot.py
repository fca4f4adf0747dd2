"""The plot: claim cost against backlog, and throughput against workers, both queues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pail_bench.report import SIDES, per_claim

COLOURS = {"original": "#c0392b", "pail": "#1f6fb2"}
LABELS = {"original": "original pailq 0.1.1", "pail": "pail"}


def plot(results: dict[str, Any], path: Path) -> None:
    """Write a three-panel PNG to ``path`` (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ms_ax, req_ax, tput_ax) = plt.subplots(1, 3, figsize=(15, 4.6))
    for side in SIDES:
        steps = results["claim_path"][side]["steps"]
        backlogs = [s["backlog"] for s in steps]
        style = {"color": COLOURS[side], "label": LABELS[side], "marker": "o"}
        ms_ax.plot(backlogs, [s["claim_ms_median"] for s in steps], **style)
        req_ax.plot(backlogs, [per_claim(s) for s in steps], **style)
        req_ax.plot(
            backlogs,
            [per_claim(s, "ListObjectsV2") for s in steps],
            color=COLOURS[side],
            linestyle="--",
            marker="x",
            label=f"{LABELS[side]}: LIST only",
        )
        runs = results["contention"][side]
        tput_ax.plot([r["workers"] for r in runs], [r["jobs_per_second"] for r in runs], **style)
    ms_ax.set(
        xscale="log",
        yscale="log",
        xlabel="pending jobs",
        ylabel="median ms per claim",
        title="Claim time against backlog",
    )
    req_ax.set(
        xscale="log",
        xlabel="pending jobs",
        ylabel="requests per claim",
        title="Claim requests against backlog",
    )
    tput_ax.set(
        xscale="log",
        xlabel="workers (threads, one client each)",
        ylabel="jobs/s",
        title=f"Throughput, {results['meta']['plan']['contention_jobs']} jobs",
    )
    tput_ax.set_xticks([r["workers"] for r in results["contention"]["pail"]])
    tput_ax.set_xticklabels([str(r["workers"]) for r in results["contention"]["pail"]])
    for ax in (ms_ax, req_ax, tput_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"pail vs the original on {results['meta']['server']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_per_job(results: dict[str, Any], path: Path) -> None:
    """Issue 17: time per job above the no-delay cost against the delay per request, with the floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pail_bench.report_latency import (
        FLOOR_ROUND_TRIPS,
        TARGET_ROUND_TRIPS,
        by_delay,
        round_trips,
    )

    section = results["per_job"]
    fig, (ms_ax, rt_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    top = 0.0
    for side in SIDES:
        rows = by_delay(section, side)
        base = rows[0.0]["ms_per_job"]
        applied = [r["applied_ms"] for r in rows.values()]
        extra = [r["ms_per_job"] - base for r in rows.values()]
        style = {"color": COLOURS[side], "label": LABELS[side], "marker": "o"}
        ms_ax.plot(applied, extra, **style)
        trips = round_trips(section, side)
        rt_ax.plot(list(trips), list(trips.values()), **style)
        top = max(top, *applied)
    xs = [0.0, top]
    ms_ax.plot(
        xs,
        [FLOOR_ROUND_TRIPS * x for x in xs],
        color="black",
        linestyle="--",
        label="floor: 2 round trips (claim write, result write)",
    )
    ms_ax.plot(
        xs,
        [TARGET_ROUND_TRIPS * x for x in xs],
        color="grey",
        linestyle=":",
        label="issue 17 target: 3.5 round trips",
    )
    rt_ax.axhline(FLOOR_ROUND_TRIPS, color="black", linestyle="--", label="floor: 2")
    rt_ax.axhline(TARGET_ROUND_TRIPS, color="grey", linestyle=":", label="target: 3.5")
    ms_ax.set(
        xlabel="delay added per request (ms, as applied)",
        ylabel="ms per job above the no-delay cost",
        title="One worker, no-op handler: time per job",
    )
    rt_ax.set(
        xlabel="delay added per request (ms)",
        ylabel="(t(d) - t(0)) / d",
        ylim=(0, None),
        title="Sequential round trips per job",
    )
    for ax in (ms_ax, rt_ax):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"pail vs the original, per-job latency, {section['started']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_partitions(results: dict[str, Any], path: Path) -> None:
    """Issue 16: jobs/s against workers per layout, and the split run's throughput over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pail_bench.report_partitions import textbook

    section = results["partitions"]
    book = textbook(section)
    fig, (curve_ax, time_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    ticks: set[int] = set()
    for layout in section["layouts"]:
        runs = layout["runs"]
        name = layout["layout"]["name"]
        if layout["layout"]["split"]:
            for run in runs:
                timeline = run["timeline"]
                smooth = [
                    sum(timeline[max(0, i - 4) : i + 1]) / min(5, i + 1)
                    for i in range(len(timeline))
                ]
                time_ax.plot(
                    range(len(timeline)), smooth, label=f"{name}, {run['workers']} workers"
                )
                for split in run["model"]["splits"]:
                    time_ax.axvline(split["seconds"], color="grey", alpha=0.4)
            continue
        workers = [r["workers"] for r in runs]
        ticks.update(workers)
        curve_ax.plot(workers, [r["jobs_per_second"] for r in runs], marker="o", label=name)
    for ax in (curve_ax, time_ax):
        ax.axhline(
            book, color="black", linestyle="--", label=f"arithmetic: {book:.2f} (5 writes/job)"
        )
    time_ax.axhline(
        book * 5 / 2, color="grey", linestyle=":", label=f"{book * 2.5:.2f}: 2 writes/job"
    )
    curve_ax.set(
        xscale="log",
        yscale="log",
        xlabel="workers",
        ylabel="jobs/s",
        title=f"Jobs/s, AWS partition rates ÷ {section['plan']['scale']:g}",
    )
    if ticks:
        curve_ax.set_xticks(sorted(ticks))
        curve_ax.set_xticklabels([str(t) for t in sorted(ticks)])
    time_ax.set(
        xlabel="seconds from start (grey: a partition split)",
        ylabel="jobs/s (5 s mean)",
        title="A single prefix while S3-like splits happen",
    )
    for ax in (curve_ax, time_ax):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"pail through the partition model, {section['started']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
