"""``python -m pail_bench [--quick]``: run the benchmark, print the table, write the results.

The full run writes ``bench/results.json``, ``bench/results.md``,
``bench/plot.png`` and refreshes the table in ``docs/performance.md``; the
quick run (CI) writes the same files under ``bench/quick/`` (gitignored) and
leaves the committed ones alone.
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

from pail_bench import original
from pail_bench.plans import FULL, QUICK, Plan
from pail_bench.plot import plot
from pail_bench.report import markdown, summarise, summary_json
from pail_bench.scenarios import BENCH_DIR, ROOT, run_plan

ORIGINAL_VENV = ROOT / ".bench-venv"
DOC = ROOT / "docs" / "performance.md"
TABLE_START = "<!-- bench:table:start -->"
TABLE_END = "<!-- bench:table:end -->"


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


def refresh_doc(table: str, command: str) -> bool:
    """Replace the table between the markers in docs/performance.md; False if there are none."""
    if not DOC.is_file():
        return False
    text = DOC.read_text()
    if TABLE_START not in text or TABLE_END not in text:
        return False
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    body = f"{TABLE_START}\nMade by `{command}`.\n\n{table}{TABLE_END}"
    DOC.write_text(head + body + tail)
    return True


def measure(plan: Plan, *, second_server: bool) -> dict[str, Any]:
    """Run ``plan`` against a fresh local server, with the original installed and checked."""
    log(f"==> the original pailq {original.VERSION} in {ORIGINAL_VENV}")
    found = original.ensure(ORIGINAL_VENV)
    log(f"    {found.module} ({found.files_verified} files match its RECORD)")
    from pail.local import LocalS3

    return run_plan(plan, found, log, LocalS3, seaweed if second_server else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute (CI)")
    parser.add_argument("--out", type=Path, help="where to write results (default: see above)")
    parser.add_argument(
        "--no-second-server", action="store_true", help="skip the SeaweedFS figures"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: redo the table, plot and doc from the results.json in --out",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    out: Path = args.out or (BENCH_DIR / "quick" if args.quick else BENCH_DIR)
    started = time.perf_counter()

    if args.report_only:
        results = json.loads((out / "results.json").read_text())
        plan = FULL if results["meta"]["plan"]["name"] == FULL.name else QUICK
    else:
        results = measure(plan, second_server=not args.no_second_server)
    figures = summarise(results)
    results["summary"] = summary_json(figures)
    table = markdown(results, figures)

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(table)
    plot(results, out / "plot.png")
    print(table)
    if plan is FULL and args.out is None and refresh_doc(table, "scripts/bench"):
        log(f"==> refreshed the table in {DOC.relative_to(ROOT)}")
    log(
        f"==> wrote {out}/results.json, results.md, plot.png in {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
