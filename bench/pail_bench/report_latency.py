"""Issue 17's figures from the ``per_job`` section: round trips per job, idle latency, the tables.

A job's time at an added delay ``d`` per request, less its time at no delay,
divided by ``d``, is the number of requests on its critical path: the
sequential round trips. ``d`` is the delay the front actually applied, on
average, which a loaded machine makes a little longer than asked.
"""

from __future__ import annotations

from typing import Any

from pail_bench.counting import by_operation

SIDES = ("original", "pail")
FLOOR_ROUND_TRIPS = 2
"""The create-only claim write and the result write: no job can do with fewer."""
TARGET_ROUND_TRIPS = 3.5
"""Issue 17's target at 20 ms per request."""
TARGET_DELAY_MS = 20.0


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def by_delay(section: dict[str, Any], side: str) -> dict[float, dict[str, float]]:
    """Per delay: pooled ms per job, the applied delay (ms), requests per job, jobs timed."""
    sums: dict[float, dict[str, float]] = {}
    for run in section["runs"][side]:
        for lane in run["lanes"]:
            d = float(lane["delay_ms"])
            s = sums.setdefault(d, {"seconds": 0.0, "jobs": 0.0, "applied": 0.0, "requests": 0.0})
            s["seconds"] += lane["ms_per_job"] * lane["jobs"] / 1000
            s["jobs"] += lane["jobs"]
            s["requests"] += lane["requests_per_job"] * lane["jobs"]
            applied = run["applied_ms"].get(f"{d:g}")
            s["applied"] += (applied if applied is not None else d) * lane["jobs"]
    return {
        d: {
            "ms_per_job": s["seconds"] / s["jobs"] * 1000,
            "applied_ms": s["applied"] / s["jobs"],
            "requests_per_job": s["requests"] / s["jobs"],
            "jobs": s["jobs"],
        }
        for d, s in sorted(sums.items())
    }


def round_trips(section: dict[str, Any], side: str) -> dict[float, float]:
    """(t(d) - t(0)) / d for every delay d > 0."""
    rows = by_delay(section, side)
    base = rows[0.0]["ms_per_job"]
    return {
        d: (r["ms_per_job"] - base) / r["applied_ms"]
        for d, r in rows.items()
        if d > 0 and r["applied_ms"] > 0
    }


def fitted_round_trips(section: dict[str, Any], side: str) -> float:
    """The least-squares slope of each job's ms against the applied delay, over every job."""
    xs: list[float] = []
    ys: list[float] = []
    for run in section["runs"][side]:
        for lane in run["lanes"]:
            d = float(lane["delay_ms"])
            applied = run["applied_ms"].get(f"{d:g}")
            xs += [applied if applied is not None else d] * len(lane["ms"])
            ys += lane["ms"]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def _contention(results: dict[str, Any], side: str, workers: int) -> dict[str, Any] | None:
    for run in results.get("contention", {}).get(side, []):
        if run["workers"] == workers:
            found: dict[str, Any] = run
            return found
    return None


def _with_enqueue(run: dict[str, Any]) -> float:
    """A raced job's requests: the workers' per claim plus the enqueue of one job."""
    enqueue = sum(run["enqueue_requests"].values()) / run["jobs"]
    return float(run["requests_per_job"] + enqueue)


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The section's headline figures (JSON), for the summary and the closing note."""
    section = results["per_job"]
    rows: list[dict[str, Any]] = []
    trips = {side: round_trips(section, side) for side in SIDES}
    for d in sorted(trips["pail"]):
        target = TARGET_ROUND_TRIPS if d == TARGET_DELAY_MS else None
        rows.append(
            {
                "name": f"sequential round trips per job above the no-delay cost, {d:g} ms",
                "original": round(trips["original"][d], 2),
                "pail": round(trips["pail"][d], 2),
                "target": f"≤ {target}" if target else "—",
                "met": None if target is None else trips["pail"][d] <= target,
            }
        )
    rows.append(
        {
            "name": "round trips per job, slope of ms/job against delay (every job)",
            "original": round(fitted_round_trips(section, "original"), 2),
            "pail": round(fitted_round_trips(section, "pail"), 2),
            "target": "—",
            "met": None,
        }
    )
    for o_idle, p_idle in zip(section["idle"]["original"], section["idle"]["pail"], strict=True):
        rows.append(
            {
                "name": f"enqueue → handler start, idle worker, {p_idle['delay_ms']:g} ms per "
                "request, p50 (ms)",
                "original": o_idle["p50_ms"],
                "pail": p_idle["p50_ms"],
                "target": "—",
                "met": None,
            }
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The section's tables."""
    section = results["per_job"]
    plan = section["plan"]
    rows = {side: by_delay(section, side) for side in SIDES}
    trips = {side: round_trips(section, side) for side in SIDES}
    table = []
    for d in sorted(rows["pail"]):
        cells = [f"{d:g}"]
        for side in SIDES:
            r = rows[side][d]
            base = rows[side][0.0]["ms_per_job"]
            cells += [
                f"{r['ms_per_job']:.1f}",
                "—" if d == 0 else f"{r['ms_per_job'] - base:.1f}",
                "—" if d == 0 else f"**{trips[side][d]:.2f}**",
                f"{r['requests_per_job']:.2f}",
            ]
        applied = rows["pail"][d]["applied_ms"]
        cells += [f"{applied:.2f}", "—" if d == 0 else f"{FLOOR_ROUND_TRIPS * applied:.1f}"]
        table.append(cells)
    fitted = {side: fitted_round_trips(section, side) for side in SIDES}
    header = ["ms added per request"]
    for side in SIDES:
        header += [f"{side}: ms/job", "ms above 0", "round trips", "requests/job"]
    header += ["applied (ms)", "floor: 2 round trips (ms)"]
    parts = [
        f"Measured {section['started']} (commit {section.get('git', '?')}): {plan['rounds']} "
        f"rounds x {plan['jobs']} jobs per "
        "delay per queue, one worker per delay, no-op handler, the delays taking turns job by "
        "job; each request delayed by a local front (half before the server, half after).",
        "",
        _table(header, table),
        "",
        f"Slope of ms/job against the applied delay over every job: original "
        f"{fitted['original']:.2f}, pail {fitted['pail']:.2f} round trips per job.",
    ]
    if section["idle"]["pail"]:
        parts += ["", _idle_table(section)]
    contention = _contention_table(results)
    if contention:
        parts += ["", contention]
    return "\n".join(parts) + "\n"


def _idle_table(section: dict[str, Any]) -> str:
    rows = []
    for o_idle, p_idle in zip(section["idle"]["original"], section["idle"]["pail"], strict=True):
        cells = [f"{p_idle['delay_ms']:g}"]
        for run in (o_idle, p_idle):
            cells.append(f"{run['p50_ms']:.0f} / {run['p99_ms']:.0f}")
        rows.append(cells)
    samples = section["plan"]["idle_samples"]
    header = [
        "ms added per request",
        "original: p50 / p99 (ms)",
        "pail: p50 / p99 (ms)",
    ]
    intro = (
        f"**Enqueue → handler start**, one idle warm worker polling every 0.1 s (ours from "
        f"0.05 s), {samples} jobs each arriving at a random phase of its polling; producer and "
        "worker both behind the front:"
    )
    return intro + "\n\n" + _table(header, rows)


def _contention_table(results: dict[str, Any]) -> str:
    rows = []
    for workers in (1, results["meta"]["plan"].get("throughput_workers", 16)):
        o, p = _contention(results, "original", workers), _contention(results, "pail", workers)
        if o is None or p is None:
            continue
        cells = [str(workers)]
        for run in (o, p):
            cells += [
                f"{_with_enqueue(run):.2f}",
                f"{run['failed_conditions_per_claim'] or 0.0:.3f}",
                f"{run['duplicates']} in {run['claims']}",
            ]
        rows.append(cells)
    if not rows:
        return ""
    header = ["workers"]
    for side in SIDES:
        header += [f"{side}: requests/job with its enqueue", "failed cond./claim", "dup."]
    return (
        "**Requests per job and failed conditional writes** (from the contention scenario of "
        f"the run above, commit {results['meta']['git']}, no delay):\n\n" + _table(header, rows)
    )


def requests_by_operation(section: dict[str, Any], side: str, delay: float) -> dict[str, float]:
    """Mean requests per job by operation at ``delay`` (for the closing note)."""
    counts: dict[str, int] = {}
    jobs = 0
    for run in section["runs"][side]:
        for lane in run["lanes"]:
            if float(lane["delay_ms"]) == delay:
                jobs += lane["jobs"]
                for op, n in by_operation(lane["requests"]).items():
                    counts[op] = counts.get(op, 0) + n
    return {op: round(n / jobs, 3) for op, n in counts.items()} if jobs else {}
