"""``scripts/simulate``: sweep many seeds, replay one with its trace, or hunt a known-bad variant.

Every failure report names the command that replays it (``Outcome.replay``):
``--seed S`` plus the flags of its family (``--sharded``, ``--pausing``,
``--hostile``, ``--features``, ``--aim phase,request,action``, ``--calm``).
"""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from tests.simulation.coverage import parse_aim, run_aimed_seed
from tests.simulation.harness import Outcome, model_named, run_seed
from tests.simulation.regressions import REGRESSIONS
from tests.simulation.sweep import sweep


def _parser() -> argparse.ArgumentParser:
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
    family = parser.add_argument_group("families (as their tests run them)")
    family.add_argument("--sharded", action="store_true", help="sharded queues that grow")
    family.add_argument("--pausing", action="store_true", help="an operator pauses and resumes")
    family.add_argument("--hostile", action="store_true", help="foreign writers")
    family.add_argument(
        "--limits", action="store_true", help="with --seed: concurrency limits and groups"
    )
    family.add_argument("--features", action="store_true", help="dedup keys, delays, cancels")
    family.add_argument(
        "--aim", help="with --seed: the aimed run of phase,request,action (coverage.py)"
    )
    parser.add_argument(
        "--known-bad",
        metavar="NAME",
        choices=[r.name for r in REGRESSIONS],
        help="sweep with this variant of regressions.py put in; print the seeds it breaks",
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", type=int, default=3, help="failing seeds' reports to print")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; 0 if every run held (or a known-bad variant was found), else 1."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.aim is not None and args.seed is None:
        parser.error("--aim replays one run: give --seed too")
    if args.known_bad is not None:
        return _hunt(args.known_bad, range(args.start, args.start + args.seeds))
    if args.seed is not None:
        try:
            outcome = _replay(args)
        except ValueError as exc:
            parser.error(str(exc))
        print(outcome.report())
        print("counts: " + ", ".join(f"{k}={v}" for k, v in sorted(outcome.counts.items())))
        print("faults: " + ", ".join(f"{k}={v}" for k, v in sorted(outcome.faults.items())))
        return 1 if outcome.failed else 0
    if args.features or args.aim:
        parser.error("--features and --aim replay one run: give --seed")
    result = sweep(
        range(args.start, args.start + args.seeds),
        model=args.model,
        chaos=not args.calm,
        processes=args.processes,
        hostile=args.hostile,
        sharded=args.sharded,
        pausing=args.pausing,
    )
    for report in result.failures[: args.show]:
        print(report, end="\n\n")
    print(result.summary())
    if result.failed_seeds:
        print(f"failed seeds: {result.failed_seeds[:50]}")
    return 1 if result.failed_seeds else 0


def _replay(args: argparse.Namespace) -> Outcome:
    seed: int = args.seed
    if args.aim is not None:
        return run_aimed_seed(seed, parse_aim(args.aim))
    if args.features:
        from tests.simulation.features import run_feature_seed

        return run_feature_seed(seed, chaos=not args.calm)
    return run_seed(
        seed,
        model_named(args.model),
        chaos=not args.calm,
        full_trace=True,
        hostile=args.hostile,
        sharded=args.sharded,
        pausing=args.pausing,
        limits=args.limits,
    )


def _hunt(name: str, seeds: range) -> int:
    """The seeds of ``seeds`` whose run breaks the variant's invariant with the variant in."""
    regression = next(r for r in REGRESSIONS if r.name == name)
    patch = pytest.MonkeyPatch()
    regression.restore_bug(patch)
    try:
        found = [s for s in seeds if regression.breaks in regression.run(s).kinds()]
    finally:
        patch.undo()
    print(
        f"{name} ({regression.family}): {regression.breaks} in {len(found)} of {len(seeds)} "
        f"seeds: {found[:20]}"
    )
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
