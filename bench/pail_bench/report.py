"""From raw results to the figures of issue 7: the summary, its targets, and markdown tables."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pail_bench.counting import by_operation, dollars, total

MILLION = 1_000_000
SIDES = ("original", "pail")


@dataclass(frozen=True)
class Figure:
    """One row of the main table: both sides, how they compare, and the target."""

    name: str
    original: str
    pail: str
    ratio: str
    target: str
    met: bool | None

    def cells(self) -> list[str]:
        verdict = {True: "yes", False: "**no**", None: "—"}[self.met]
        return [self.name, self.original, self.pail, self.ratio, self.target, verdict]


def _steps(results: dict[str, Any], side: str) -> dict[int, dict[str, Any]]:
    return {s["backlog"]: s for s in results["claim_path"][side]["steps"]}


def per_claim(step: dict[str, Any], op: str | None = None) -> float:
    return float(total(step["claim_requests"], op) / step["claims"])


def dollars_per_million(step: dict[str, Any]) -> float:
    """Enqueue, claim and complete of one job, at S3 Standard prices, per million jobs."""
    return float(dollars(step["job_counts"]) / step["claims"] * MILLION)


def contention_dollars_per_million(run: dict[str, Any]) -> float:
    """A raced job's cost: the workers' requests per claim plus the enqueue of one job."""
    if not run["claims"]:
        return 0.0
    work = dollars(run["requests"]) / run["claims"]
    enqueue = dollars(run["enqueue_requests"]) / run["jobs"]
    return float((work + enqueue) * MILLION)


def server_rates(results: dict[str, Any], server: str = "server") -> dict[str, float]:
    """Operations per second at the most client threads measured."""
    ceiling = results[server]["ceiling"]
    rates: dict[str, float] = ceiling["ops_per_second"][str(max(ceiling["threads"]))]
    return rates


def ceiling_jobs_per_second(rates: dict[str, float], per_job: dict[str, float]) -> float:
    """Jobs/s the server allows for this mix of requests per job.

    Each request takes ``1 / rate`` of the server, as measured for its
    operation (an operation not measured counts at the PUT rate), so the
    server's time per job is the sum over the mix.
    """
    seconds = sum(n / rates.get(op, rates["PutObject"]) for op, n in per_job.items())
    return 1 / seconds if seconds else 0.0


def _contention(results: dict[str, Any], side: str, workers: int) -> dict[str, Any] | None:
    for run in results["contention"][side]:
        if run["workers"] == workers:
            found: dict[str, Any] = run
            return found
    return None


def _fmt(value: float, digits: int = 2) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _times(a: float, b: float, *, fewer: bool = True) -> str:
    """``a / b`` as "Nx fewer|more" (or "—" when undefined)."""
    if b == 0:
        return "∞" if a else "—"
    return f"{a / b:,.1f}x" + (" fewer" if fewer else "")


def summarise(results: dict[str, Any]) -> list[Figure]:
    """The rows of the main table, in issue 7's order."""
    plan = results["meta"]["plan"]
    cost_backlog = plan["cost_backlog"]
    low, high = min(plan["backlogs"]), max(plan["backlogs"])
    steps = {side: _steps(results, side) for side in SIDES}
    rows = []

    lists = [
        per_claim(s[cost_backlog], "ListObjectsV2") for s in (steps["original"], steps["pail"])
    ]
    rows.append(
        Figure(
            f"LIST per claim, backlog {cost_backlog:,}",
            _fmt(lists[0], 3),
            _fmt(lists[1], 3),
            _times(lists[0], lists[1]),
            "≤ 0.05",
            lists[1] <= 0.05,
        )
    )

    costs = {side: {b: dollars_per_million(s) for b, s in steps[side].items()} for side in SIDES}
    flat = max(costs["pail"].values()) / min(costs["pail"].values())
    rows.append(
        Figure(
            f"$ per million jobs, backlog {cost_backlog:,}",
            f"${costs['original'][cost_backlog]:.2f}",
            f"${costs['pail'][cost_backlog]:.2f}",
            _times(costs["original"][cost_backlog], costs["pail"][cost_backlog], fewer=False)
            + " cheaper",
            "≤ $16",
            costs["pail"][cost_backlog] <= 16,
        )
    )
    spread = " → ".join(f"${costs['pail'][b]:.2f}" for b in sorted(costs["pail"]))
    rows.append(
        Figure(
            f"$ per million jobs, backlog {low:,} → {high:,}",
            " → ".join(f"${costs['original'][b]:.2f}" for b in sorted(costs["original"])),
            spread,
            f"pail max ÷ min {flat:.2f}",
            "flat (max ÷ min ≤ 1.1)",
            flat <= 1.1,
        )
    )
    ms = {
        side: (steps[side][low]["claim_ms_median"], steps[side][high]["claim_ms_median"])
        for side in SIDES
    }
    growth = {side: ms[side][1] / ms[side][0] for side in SIDES}
    rows.append(
        Figure(
            f"median ms per claim, backlog {low:,} / {high:,}",
            f"{_fmt(ms['original'][0])} / {_fmt(ms['original'][1])}",
            f"{_fmt(ms['pail'][0])} / {_fmt(ms['pail'][1])}",
            _times(ms["original"][1], ms["pail"][1], fewer=False) + f" faster at {high:,}",
            "—",
            None,
        )
    )
    rows.append(
        Figure(
            f"claim time, backlog {high:,} ÷ {low:,}",
            f"{growth['original']:.2f}",
            f"{growth['pail']:.2f}",
            "—",
            "≤ 1.2",
            growth["pail"] <= 1.2,
        )
    )

    w = plan["throughput_workers"]
    oc, pc = _contention(results, "original", w), _contention(results, "pail", w)
    if oc and pc:
        ofc, pfc = (
            oc["failed_conditions_per_claim"] or 0.0,
            pc["failed_conditions_per_claim"] or 0.0,
        )
        rows.append(
            Figure(
                f"failed conditional writes per claim, {w} workers",
                _fmt(ofc),
                _fmt(pfc, 3),
                _times(ofc, pfc),
                "≤ 0.2",
                pfc <= 0.2,
            )
        )
        rows.append(
            Figure(
                f"requests per job, {w} workers",
                _fmt(oc["requests_per_job"]),
                _fmt(pc["requests_per_job"]),
                _times(oc["requests_per_job"], pc["requests_per_job"]),
                "—",
                None,
            )
        )
        rows.append(
            Figure(
                f"duplicate executions, {plan['contention_jobs']} jobs, {w} workers",
                f"{oc['duplicates']} in {oc['claims']} claims",
                f"{pc['duplicates']} in {pc['claims']} claims",
                "—",
                "0",
                pc["duplicates"] == 0,
            )
        )
        speedup = pc["jobs_per_second"] / oc["jobs_per_second"] if oc["jobs_per_second"] else 0
        rows.append(
            Figure(
                f"throughput, {w} workers (jobs/s)",
                _fmt(oc["jobs_per_second"]),
                _fmt(pc["jobs_per_second"]),
                f"{speedup:.1f}x faster",
                "≥ 20x",
                speedup >= 20,
            )
        )
        rates = server_rates(results)
        mix = ceiling_jobs_per_second(rates, pc["per_job"])
        ideal = ceiling_jobs_per_second(rates, IDEAL_WORKER_MIX)
        rows.append(
            Figure(
                f"throughput ÷ server ceiling for its request mix, {w} workers",
                f"{oc['jobs_per_second'] / ceiling_jobs_per_second(rates, oc['per_job']):.0%}",
                f"{pc['jobs_per_second'] / mix:.0%} (of {mix:.0f} jobs/s; "
                f"{pc['jobs_per_second'] / ideal:.0%} of {ideal:.0f} for 5 requests/job)",
                "—",
                "≥ 60%",
                pc["jobs_per_second"] / mix >= 0.6,
            )
        )

    second = results.get("second_server", {})
    if "contention" in second:
        so, sp = second["contention"]["original"], second["contention"]["pail"]
        ratio = sp["jobs_per_second"] / so["jobs_per_second"] if so["jobs_per_second"] else 0
        rates = server_rates(results, "second_server")
        mix = ceiling_jobs_per_second(rates, sp["per_job"])
        rows.append(
            Figure(
                f"throughput, {w} workers, on {second['name']} (jobs/s)",
                f"{_fmt(so['jobs_per_second'])} ({so['duplicates']} duplicate executions)",
                f"{_fmt(sp['jobs_per_second'])} ({sp['jobs_per_second'] / mix:.0%} of its "
                f"ceiling for the mix; {sp['duplicates']} duplicate executions)",
                f"{ratio:.1f}x faster",
                "—",
                None,
            )
        )

    lat = results["latency"]
    rows.append(
        Figure(
            "enqueue → claim, idle warm worker, p50 / p99 (ms)",
            f"{_fmt(lat['original']['p50_ms'])} / {_fmt(lat['original']['p99_ms'])} "
            f"({lat['original']['ceiling']} s poll; p50 {_fmt(lat['original']['wait_p50_ms'], 1)} "
            f"waiting + {_fmt(lat['original']['claim_p50_ms'], 1)} in the claim; "
            "≈ 10,000 at its 20 s default)",
            f"{_fmt(lat['pail']['p50_ms'])} / {_fmt(lat['pail']['p99_ms'])} "
            f"({lat['pail']['floor']} s → {lat['pail']['ceiling']} s polling; p50 "
            f"{_fmt(lat['pail']['wait_p50_ms'], 1)} waiting + "
            f"{_fmt(lat['pail']['claim_p50_ms'], 1)} in the claim)",
            "—",
            "p50 ≤ 100",
            lat["pail"]["p50_ms"] <= 100,
        )
    )
    for o_idle, p_idle in zip(
        results["idle"]["original"]["settings"], results["idle"]["pail"]["settings"], strict=True
    ):
        rows.append(
            Figure(
                f"idle requests per minute: {p_idle['name']} vs original {o_idle['name']}",
                _fmt(o_idle["per_minute"], 1),
                _fmt(p_idle["per_minute"], 1),
                "—",
                "report",
                None,
            )
        )
    return rows


IDEAL_WORKER_MIX = {"GetObject": 1.0, "PutObject": 2.0, "DeleteObject": 2.0}
"""A worker's requests for one job when nothing races: GET queue, PUT run, DELETE queue, PUT done, DELETE run."""


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(results: dict[str, Any], figures: list[Figure]) -> str:
    """Every table of the run, as markdown."""
    meta = results["meta"]
    plan = meta["plan"]
    parts = [
        f"Run: {meta['started']}, commit {meta['git']}, {meta['plan']['name']} plan, "
        f"{meta['wall_seconds']} s, "
        f"{meta['machine']}, Python {meta['python']}; server: {meta['server']}; "
        f"original: pailq {meta['original']['version']} (Python {meta['original']['python']}, "
        f"{meta['original']['files_verified']} files verified against its wheel's RECORD).",
        "",
        _table(
            ["figure", "original 0.1.1", "pail", "ratio", "target", "met"],
            [f.cells() for f in figures],
        ),
        "",
        f"**Requests per job by operation** (backlog {plan['cost_backlog']:,}, 1 worker: "
        "enqueue + claim + complete)",
        "",
        _requests_by_op(results, plan["cost_backlog"]),
        "",
        "**Claim cost against backlog** (1 worker; requests and time of `claim()` alone)",
        "",
        _claim_table(results),
        "",
        f"**Contention** ({plan['contention_jobs']} jobs; the original stops at "
        f"{plan['original_contention_cap']:.0f} s and is measured over the claims it made; "
        "requests/job counts the workers' requests, $/M jobs adds the enqueue)",
        "",
        _contention_table(results),
        "",
        "**Idle cost** (one worker on an empty queue, its own `work` loop, "
        f"{plan['idle_seconds']:.0f} s from start)",
        "",
        _idle_table(results),
        "",
        "**The server's ceiling** (one client process, N threads, one client each)",
        "",
        _ceiling_table(results),
        "",
        f"**LIST time against bucket size** (MaxKeys={plan['list_max_keys']}, median of "
        f"{plan['list_repeats']})",
        "",
        _list_table(results),
    ]
    return "\n".join(parts) + "\n"


def _requests_by_op(results: dict[str, Any], backlog: int) -> str:
    per = {side: _steps(results, side)[backlog] for side in SIDES}
    ops = sorted(
        set(by_operation(per["original"]["job_counts"]))
        | set(by_operation(per["pail"]["job_counts"]))
    )
    rows = []
    for op in ops:
        cells = [op]
        for side in SIDES:
            n = by_operation(per[side]["job_counts"]).get(op, 0) / per[side]["claims"]
            cells.append(_fmt(n, 3))
        rows.append(cells)
    rows.append(
        ["**$ per million jobs**"]
        + [f"**${dollars_per_million(per[side]):.2f}**" for side in SIDES]
    )
    return _table(["operation", "original", "pail"], rows)


def _claim_table(results: dict[str, Any]) -> str:
    steps = {side: _steps(results, side) for side in SIDES}
    rows = []
    for backlog in sorted(steps["pail"]):
        cells = [f"{backlog:,}"]
        for side in SIDES:
            s = steps[side][backlog]
            cells += [
                str(s["claims"]),
                _fmt(per_claim(s), 2),
                _fmt(per_claim(s, "ListObjectsV2"), 3),
                _fmt(s["claim_ms_median"], 1),
                f"${dollars_per_million(s):.2f}",
            ]
        rows.append(cells)
    header = ["backlog"]
    for side in SIDES:
        header += [f"{side}: claims", "requests/claim", "LIST/claim", "median ms", "$/M jobs"]
    return _table(header, rows)


def _contention_table(results: dict[str, Any]) -> str:
    rows = []
    for p_run in results["contention"]["pail"]:
        o_run = _contention(results, "original", p_run["workers"])
        cells = [str(p_run["workers"])]
        for run in (o_run, p_run):
            if run is None:
                cells += ["—"] * 6
                continue
            cells += [
                f"{run['claims']}" + (" (capped)" if run["capped"] else ""),
                _fmt(run["jobs_per_second"], 1),
                _fmt(run["failed_conditions_per_claim"] or 0.0, 3),
                _fmt(run["requests_per_job"] or 0.0, 2),
                f"${contention_dollars_per_million(run):.2f}",
                str(run["duplicates"]),
            ]
        rows.append(cells)
    header = ["workers"]
    for side in SIDES:
        header += [
            f"{side}: jobs run",
            "jobs/s",
            "failed cond./claim",
            "requests/job",
            "$/M jobs",
            "dup.",
        ]
    return _table(header, rows)


def _idle_table(results: dict[str, Any]) -> str:
    rows = []
    for side in SIDES:
        for s in results["idle"][side]["settings"]:
            counts = by_operation(s["requests"])
            listed = ", ".join(f"{op} {n}" for op, n in counts.items())
            rows.append(
                [
                    side,
                    s["name"],
                    _fmt(s["per_minute"], 1),
                    listed or "none",
                    f"${dollars(s['requests']) * 60 / s['seconds'] * 60 * 24 * 30:.2f}",
                ]
            )
    return _table(["queue", "polling", "requests/min", "requests", "$ per 30 days"], rows)


def _ceiling_table(results: dict[str, Any]) -> str:
    rows = []
    for server in ("server", "second_server"):
        data = results.get(server, {})
        if "ceiling" not in data:
            continue
        name = results["meta"]["server"] if server == "server" else data.get("name", server)
        ceiling = data["ceiling"]
        for threads in ceiling["threads"]:
            rates = ceiling["ops_per_second"][str(threads)]
            rows.append(
                [name, str(threads)]
                + [_fmt(rates.get(op, 0.0), 0) for op in OPS]
                + [f"{ceiling_jobs_per_second(rates, IDEAL_WORKER_MIX):.0f}"]
            )
    return _table(
        ["server", "threads", *[f"{op}/s" for op in OPS], "jobs/s at 5 requests/job"], rows
    )


OPS = ("PutObject", "GetObject", "HeadObject", "ListObjectsV2", "DeleteObject")


def _list_table(results: dict[str, Any]) -> str:
    rows = []
    for server in ("server", "second_server"):
        data = results.get(server, {})
        if "list_scaling" not in data:
            continue
        name = results["meta"]["server"] if server == "server" else data.get("name", server)
        sizes = data["list_scaling"]["sizes"]
        cells = [name] + [f"{s['objects']:,}: {s['median_ms']:.1f} ms" for s in sizes]
        growth = sizes[-1]["median_ms"] / sizes[0]["median_ms"]
        rows.append([cells[0], " · ".join(cells[1:]), f"{growth:.2f}x"])
    skipped = results.get("second_server", {}).get("skipped")
    if skipped:
        rows.append(["second server", f"skipped: {skipped}", "—"])
    return _table(
        ["server", "median LIST time by objects in the bucket", "largest ÷ smallest"], rows
    )


def summary_json(figures: list[Figure]) -> list[dict[str, Any]]:
    return [asdict(f) for f in figures]
