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
