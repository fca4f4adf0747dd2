"""``scripts/simulate``: sweep many seeds, or replay one with its trace."""

from __future__ import annotations

import argparse
import os
import sys

from tests.simulation.harness import model_named, run_seed
from tests.simulation.sweep import sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/simulate", description="Deterministic simulation of pail's protocol."
    )
    parser.add_argument("--seeds", type=int, default=10_000, help="how many seeds to sweep")
    parser.add_argument("--start", type=int, default=0, help="the first seed of the sweep")
    parser.add_argument("--seed", type=int, help="replay this one seed and print its trace")
    parser.add_argument("--model", default="pail", choices=["pail", "original"])
    parser.add_argument(
        "--calm", action="store_true", help="no faults, crashes, stalls or late heartbeats"
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", type=int, default=3, help="failing seeds' reports to print")
    args = parser.parse_args(argv)
    chaos = not args.calm
    if args.seed is not None:
        outcome = run_seed(args.seed, model_named(args.model), chaos=chaos, full_trace=True)
        print(outcome.report())
        print("counts: " + ", ".join(f"{k}={v}" for k, v in sorted(outcome.counts.items())))
        print("faults: " + ", ".join(f"{k}={v}" for k, v in sorted(outcome.faults.items())))
        return 1 if outcome.failed else 0
    result = sweep(
        range(args.start, args.start + args.seeds),
        model=args.model,
        chaos=chaos,
        processes=args.processes,
    )
    for report in result.failures[: args.show]:
        print(report, end="\n\n")
    print(result.summary())
    if result.failed_seeds:
        print(f"failed seeds: {result.failed_seeds[:50]}")
    return 1 if result.failed_seeds else 0


if __name__ == "__main__":
    sys.exit(main())
