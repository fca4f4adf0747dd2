"""``python -m pail_bench [--quick] [--only SECTIONS]``: run the benchmark, print the tables, write the results.

The full run writes ``bench/results.json``, ``bench/results.md``, the plots
(``bench/plot.png``, ``per_job.png``, ``partitions.png``) and refreshes the
tables in ``docs/performance.md`` and ``docs/scaling.md``; the quick run
(CI) writes the same files under ``bench/quick/`` (gitignored) and leaves
the committed ones alone. ``--only per_job,partitions`` measures just those
sections and merges them into the ``results.json`` already in the output
folder, so one part can be measured again without the rest.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pail_bench import costs, original, report_latency, report_partitions
from pail_bench.plans import FULL, QUICK, Plan
from pail_bench.plot import plot, plot_partitions, plot_per_job
from pail_bench.report import markdown, summarise, summary_json
from pail_bench.scenarios import BENCH_DIR, ROOT, SECTIONS, run_plan

ORIGINAL_VENV = ROOT / ".bench-venv"
DOC = ROOT / "docs" / "performance.md"
SCALING_DOC = ROOT / "docs" / "scaling.md"
CORE = ("server", "claim_path", "contention", "idle", "latency")
"""The sections the main table needs."""


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def seaweed() -> tuple[str, AbstractContextManager[Any]] | None:
    """SeaweedFS through the contract suite's launcher, if its binary is installed."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        servers: Any = importlib.import_module("tests.servers")
    except ImportError:
        return None
    weed = servers.find_weed()
    if weed is None:
        return None
    version = subprocess.run(
        [str(weed), "version"], capture_output=True, text=True, check=False, timeout=30
    ).stdout.split()
    name = "SeaweedFS " + (version[2] if len(version) > 2 else "?") + " (weed mini)"
    return name, servers.SeaweedS3()


def refresh_doc(doc: Path, marker: str, table: str, command: str) -> bool:
    """Replace the text between ``<!-- bench:{marker}:start -->`` and its end in ``doc``.

    False if the file or its markers are missing.
    """
    start, end = f"<!-- bench:{marker}:start -->", f"<!-- bench:{marker}:end -->"
    if not doc.is_file():
        return False
    text = doc.read_text()
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    body = f"{start}\nMade by `{command}`.\n\n{table}{end}"
    doc.write_text(head + body + tail)
    return True


def report(results: dict[str, Any], out: Path) -> dict[str, str]:
    """Summaries into ``results``, the plots into ``out``; the markdown of each part present."""
    parts: dict[str, str] = {}
    if all(section in results for section in CORE):
        figures = summarise(results)
        results["summary"] = summary_json(figures)
        parts["table"] = markdown(results, figures)
        plot(results, out / "plot.png")
    if "per_job" in results:
        results["summary_per_job"] = report_latency.summary(results)
        parts["per-job"] = report_latency.markdown(results)
        plot_per_job(results, out / "per_job.png")
    if "partitions" in results:
        results["summary_partitions"] = report_partitions.summary(results)
        parts["partitions"] = report_partitions.markdown(results)
        plot_partitions(results, out / "partitions.png")
    if "shards" in results:
        results["summary_shards"] = report_partitions.shard_summary(results)
        rows = results["summary_shards"]
        parts["shards"] = (
            report_partitions.markdown(results, "shards")
            + "\n"
            + "\n".join(
                f"- {r['name']}: **{r['value']}** ({r['check']}){'' if r['met'] else ' — not met'}"
                for r in rows
            )
            + "\n"
        )
    if "claim_path" in results:
        results["summary_costs"] = [
            {"name": name, "per_million_jobs": values} for name, values in costs.table(results)
        ]
        parts["costs"] = costs.markdown(results)
    return parts


def measure(
    plan: Plan, *, second_server: bool, only: frozenset[str] | None = None
) -> dict[str, Any]:
    """Run ``plan`` against a fresh local server, with the original installed and checked."""
    log(f"==> the original pailq {original.VERSION} in {ORIGINAL_VENV}")
    found = original.ensure(ORIGINAL_VENV)
    log(f"    {found.module} ({found.files_verified} files match its RECORD)")
    from pail.local import LocalS3

    return run_plan(plan, found, log, LocalS3, seaweed if second_server else None, only)


def _sections(text: str) -> frozenset[str]:
    chosen = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = chosen - set(SECTIONS)
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown section(s) {sorted(unknown)}; choose from {', '.join(SECTIONS)}"
        )
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute (CI)")
    parser.add_argument("--out", type=Path, help="where to write results (default: see above)")
    parser.add_argument(
        "--no-second-server", action="store_true", help="skip the SeaweedFS figures"
    )
    parser.add_argument(
        "--only",
        type=_sections,
        help=f"comma-separated sections to measure ({', '.join(SECTIONS)}), merged into the "
        "results.json in --out",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: redo the tables, plots and docs from the results.json in --out",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    out: Path = args.out or (BENCH_DIR / "quick" if args.quick else BENCH_DIR)
    started = time.perf_counter()

    previous = out / "results.json"
    if args.report_only:
        results = json.loads(previous.read_text())
        plan = FULL if results["meta"]["plan"]["name"] == FULL.name else QUICK
    else:
        results = measure(plan, second_server=not args.no_second_server, only=args.only)
        if args.only and previous.is_file():
            merged = json.loads(previous.read_text())
            if merged["meta"]["plan"]["name"] != plan.name:
                raise SystemExit(f"{previous} is from the {merged['meta']['plan']['name']} plan")
            merged.update({k: v for k, v in results.items() if k in args.only})
            merged["meta"].setdefault("merged", []).append(results["meta"])
            results = merged

    out.mkdir(parents=True, exist_ok=True)
    parts = report(results, out)
    text = "\n".join(parts.values())
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(text)
    print(text)
    if plan is FULL and args.out is None:
        docs = (
            ("table", DOC),
            ("per-job", DOC),
            ("partitions", SCALING_DOC),
            ("shards", SCALING_DOC),
            ("costs", SCALING_DOC),
        )
        for marker, doc in docs:
            if marker in parts and refresh_doc(doc, marker, parts[marker], "scripts/bench"):
                log(f"==> refreshed {marker} in {doc.relative_to(ROOT)}")
    log(
        f"==> wrote {out}/results.json, results.md and plots in {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
