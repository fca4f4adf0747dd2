"""Issue 16's partition figures: jobs/s against workers per layout, and the arithmetic that predicts them.

The arithmetic: a partition takes ``W`` writes and ``R`` reads a second. A
layout whose job puts ``w_p`` writes and ``r_p`` reads on partition ``p``
can run at most ``min over p of min(W / w_p, R / r_p)`` jobs a second. The
mix per job is what the bench counted in the measurement window (requests
the front admitted; a 503 is not admitted), spread over partitions in the
proportions the front's model counted.
"""

from __future__ import annotations

from typing import Any

WRITE_OPS = frozenset({"PutObject", "DeleteObject", "CopyObject", "PostObject"})
NOT_ADMITTED = frozenset({503, 0})
"""503 SlowDown (throttled by the front) and 0 (no response at all)."""
TEXTBOOK_WRITES = 5
"""PUT queue/, PUT run/, DELETE queue/, PUT done/, DELETE run/: one job, nothing racing."""
TOLERANCE = 0.2
"""Issue 16: the measured one-partition ceiling matches the arithmetic within 20%."""


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mix(counts: dict[str, int]) -> dict[str, int]:
    """Admitted writes and reads, and throttled requests, in ``{"Op status": n}`` counts.

    >>> mix({"PutObject 200": 3, "PutObject 412": 1, "GetObject 200": 2, "DeleteObject 503": 4})
    {'writes': 4, 'reads': 2, 'throttled': 4}
    """
    out = {"writes": 0, "reads": 0, "throttled": 0}
    for key, n in counts.items():
        op, _, status = key.partition(" ")
        if int(status) in NOT_ADMITTED:
            out["throttled"] += n
        else:
            out["writes" if op in WRITE_OPS else "reads"] += n
    return out


def per_job(run: dict[str, Any]) -> dict[str, float]:
    """The window's admitted writes and reads, and throttled requests, per job."""
    jobs = run["window_jobs"]
    counted = mix(run["window_requests"])
    return {k: v / jobs for k, v in counted.items()} if jobs else {}


def _shares(model: dict[str, Any]) -> list[tuple[float, float]]:
    """Each serving partition's share of the admitted writes and reads, over the whole run."""
    serving = [p for p in model["partitions"] if not p["retired"]]
    writes = sum(p["admitted"].get("write", 0) for p in serving) or 1
    reads = sum(p["admitted"].get("read", 0) for p in serving) or 1
    return [
        (p["admitted"].get("write", 0) / writes, p["admitted"].get("read", 0) / reads)
        for p in serving
    ]


def predicted(run: dict[str, Any]) -> float | None:
    """Jobs/s the partitions allow for the run's measured mix (None: no limit)."""
    model = run.get("model")
    mixed = per_job(run)
    if model is None or not mixed or model["splits"]:
        return None  # no limit, or partitions of different ages: no one mix to divide by
    w_rate, r_rate = model["rates"]["writes"], model["rates"]["reads"]
    limits = []
    for write_share, read_share in _shares(model):
        if write_share:
            limits.append(w_rate / (mixed["writes"] * write_share))
        if read_share:
            limits.append(r_rate / (mixed["reads"] * read_share))
    return min(limits) if limits else None


def _runs(section: dict[str, Any], name: str) -> list[dict[str, Any]]:
    for layout in section["layouts"]:
        if layout["layout"]["name"].startswith(name):
            runs: list[dict[str, Any]] = layout["runs"]
            return runs
    return []


def _single(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        run
        for layout in section["layouts"]
        if layout["layout"]["name"] == "single prefix"
        for run in layout["runs"]
    ]


def textbook(section: dict[str, Any]) -> float:
    """AWS's write rate, scaled, over 5 writes a job."""
    scale = float(section["plan"]["scale"])
    return 3500.0 / scale / TEXTBOOK_WRITES


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The section's headline figures (JSON)."""
    section = results["partitions"]
    rows: list[dict[str, Any]] = []
    single = _single(section)
    ceiling = _runs(section, "no limit")
    book = textbook(section)
    if ceiling:
        top = max(ceiling, key=lambda r: r["jobs_per_second"])
        rows.append(
            {
                "name": f"server's own ceiling through the front, best of {len(ceiling)} runs "
                f"({top['workers']} workers, jobs/s)",
                "value": top["jobs_per_second"],
                "check": f"16 partitions at 1/{section['plan']['scale']:g} of AWS's rates need "
                f"{16 * book:.1f} jobs/s = {16 * book / top['jobs_per_second']:.0%} of it",
                "met": 16 * book <= 0.6 * top["jobs_per_second"],
            }
        )
    if single:
        best = max(single, key=lambda r: r["jobs_per_second"])
        pred = predicted(best)
        rows.append(
            {
                "name": "single prefix: best jobs/s over worker counts, against 3,500/scale ÷ "
                "5 writes per job",
                "value": best["jobs_per_second"],
                "check": f"{book:.3f} by the arithmetic, ratio {best['jobs_per_second'] / book:.2f}"
                f" ({best['workers']} workers; {per_job(best)['writes']:.2f} writes/job measured, "
                f"which allow {pred:.3f})"
                if pred
                else f"{book:.3f} by the arithmetic",
                "met": abs(best["jobs_per_second"] / book - 1) <= TOLERANCE,
            }
        )
    for run in _runs(section, "single prefix, hot"):
        early, late = _rate(run, 0.0, 0.3), _rate(run, 0.7, 1.0)
        rows.append(
            {
                "name": f"single prefix with S3-like splits, {run['workers']} workers (jobs/s)",
                "value": round(late, 3),
                "check": f"first 30% of the run {early:.2f} → last 30% {late:.2f}, "
                f"{len(run['model']['splits'])} splits; {late / book:.1f}x one partition",
                "met": None,
            }
        )
    return rows


def _rate(run: dict[str, Any], start: float, end: float) -> float:
    """Jobs/s over a fraction of the run's timeline (from its start, warm-up included)."""
    timeline: list[int] = run["timeline"]
    if not timeline:
        return 0.0
    lo, hi = (
        int(len(timeline) * start),
        max(int(len(timeline) * end), int(len(timeline) * start) + 1),
    )
    window = timeline[lo:hi]
    return sum(window) / len(window)


def shard_summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``shards`` section's headline: best jobs/s per shard count, and 16 (or most) against 1.

    >>> run = {"jobs_per_second": 1.0, "duplicates": 0, "audit": {"lost": 0}, "workers": 4}
    >>> layouts = [{"layout": {"name": n, "connect": {"shards": s}}, "runs": [dict(run, jobs_per_second=j)]}
    ...            for n, s, j in (("1 shard", 1, 0.7), ("16 shards", 16, 7.0))]
    >>> [row["value"] for row in shard_summary({"shards": {"plan": {"scale": 1000}, "layouts": layouts}})]
    [0.7, 7.0, 10.0]
    """
    section = results["shards"]
    book = textbook(section)
    best: dict[int, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for layout in section["layouts"]:
        count = int(layout["layout"].get("connect", {}).get("shards", 1))
        runs = layout["runs"]
        top = max(runs, key=lambda r: r["jobs_per_second"])
        best[count] = top
        dups = sum(r["duplicates"] for r in runs)
        lost = sum(r["audit"]["lost"] for r in runs)
        rows.append(
            {
                "name": f"{count} shard(s): best jobs/s ({top['workers']} workers)",
                "value": top["jobs_per_second"],
                "check": f"{count * book:.2f} by the arithmetic ({count} x {book:.2f}); "
                f"{dups} duplicates, {lost} lost over {len(runs)} runs",
                "met": dups == 0 and lost == 0,
            }
        )
    if 1 in best and len(best) > 1:
        most = max(best)
        ratio = best[most]["jobs_per_second"] / max(best[1]["jobs_per_second"], 1e-9)
        rows.append(
            {
                "name": f"{most} shards ÷ 1 shard, best jobs/s",
                "value": round(ratio, 2),
                "check": f"target >= {most / 2:g}x",
                "met": ratio >= most / 2,
            }
        )
    return rows


def markdown(results: dict[str, Any], name: str = "partitions") -> str:
    """The section's tables (``name``: ``partitions``, or ``shards``)."""
    section = results[name]
    plan = section["plan"]
    scale = plan["scale"]
    w, r = 3500 / scale, 5500 / scale
    book = textbook(section)
    window = plan.get("shard_window_seconds") if name == "shards" else plan["window_seconds"]
    parts = [
        f"Measured {section['started']} (commit {section.get('git', '?')}). Rates per "
        f"partition: AWS's 3,500 writes/s and 5,500 reads/s divided by {scale:g}: {w:g} "
        f"writes/s, {r:g} reads/s. Producer threads (one per 4 workers) keep 8 jobs per "
        f"worker (at least {plan.get('min_backlog', 32)}) waiting; jobs/s counted over "
        f"{window:g} s after {plan['warmup_seconds']:g} s of warm-up ({plan['ceiling_window_seconds']:g} s without "
        f"a limit). The arithmetic: {w:g} writes/s ÷ 5 writes per job = {book:.2f} jobs/s; "
        f"for its mix, {w:g} ÷ the admitted writes per job counted in the window (so "
        "measured ÷ that is how much of the partition's write rate the workers used). "
        "Left to the reaper: jobs holding a lease at the end because a worker gave up on a "
        "request after botocore's 5 attempts.",
        "",
    ]
    rows = []
    for layout in section["layouts"]:
        for run in layout["runs"]:
            mixed = per_job(run)
            pred = predicted(run)
            audit = run["audit"]
            rows.append(
                [
                    layout["layout"]["name"],
                    str(run["workers"]),
                    f"{run['jobs_per_second']:.2f}",
                    f"{mixed.get('writes', 0):.2f}",
                    f"{mixed.get('reads', 0):.2f}",
                    f"{mixed.get('throttled', 0):.2f}",
                    "—" if pred is None else f"{pred:.2f}",
                    "—" if pred is None else f"{run['jobs_per_second'] / pred:.2f}",
                    "—" if run.get("model") is None else f"{run['jobs_per_second'] / book:.2f}",
                    f"{run['duplicates']} / {audit['lost']} / {audit.get('awaiting_reaper', 0)}",
                    str(sum(run["errors"].values())),
                ]
            )
    parts.append(
        _table(
            [
                "layout",
                "workers",
                "jobs/s",
                "writes/job",
                "reads/job",
                "503s/job",
                "arithmetic for its mix (jobs/s)",
                "measured ÷ that",
                f"measured ÷ {book:.2f} (5 writes/job)",
                "dup. / lost / left to the reaper",
                "errors",
            ],
            rows,
        )
    )
    for run in _runs(section, "single prefix, hot"):
        parts += ["", _split_story(run)]
    return "\n".join(parts) + "\n"


def _split_story(run: dict[str, Any]) -> str:
    """The split run: throughput by 10 s, the splits, and each partition's load while it served."""
    timeline = run["timeline"]
    bins = [timeline[i : i + 10] for i in range(0, len(timeline), 10)]
    curve = " · ".join(f"{sum(b) / len(b):.2f}" for b in bins if len(b) >= 5)
    model = run["model"]
    rows = []
    for p in sorted(model["partitions"], key=lambda p: (p["lo"], p["from_seconds"])):
        if p["retired"]:
            continue
        life = max(p["until_seconds"] - p["from_seconds"], 1e-9)
        rows.append(
            [
                f"`{p['lo'] or '(start)'}` … `{p['hi'] or '(end)'}`",
                f"{p['from_seconds']:.0f}",
                f"{p['admitted'].get('write', 0) / life:.2f}",
                f"{p['admitted'].get('read', 0) / life:.2f}",
                str(p["throttled"].get("write", 0) + p["throttled"].get("read", 0)),
            ]
        )
    return (
        f"**With splits** ({run['workers']} workers, {len(model['splits'])} splits): jobs/s "
        f"by 10 s from the start: {curve}. The partitions at the end, each with the load it "
        "took from when it was made:\n\n"
        + _table(["partition", "made at (s)", "writes/s", "reads/s", "503s"], rows)
    )
