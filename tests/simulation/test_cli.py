"""``scripts/simulate`` (``cli.py``): the replay command every failure report names must replay it.

A report that names a command which does not reproduce the failure sends
its reader nowhere; these run the printed command and compare.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.simulation import cli
from tests.simulation.coverage import first_strike, run_aimed_seed
from tests.simulation.regressions import REGRESSIONS

ROOT = Path(__file__).resolve().parents[2]


def _arguments(replay: str) -> list[str]:
    words = shlex.split(replay)
    assert words[0] == "scripts/simulate", replay
    return words[1:]


@pytest.mark.parametrize(
    "name", ["reaper-leaves-expired-leases", "pause-check-failure-walks-its-page"]
)
def test_given_a_failing_run_when_its_printed_replay_is_run_then_it_fails_the_same_way(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    regression = next(r for r in REGRESSIONS if r.name == name)
    assert regression.seed is not None  # pinned by a seed, not by a schedule
    regression.restore_bug(monkeypatch)
    failed = regression.run(regression.seed)
    assert failed.failed
    assert f"replay: {failed.replay}" in failed.report()
    assert failed.replay == regression.replay(regression.seed)

    code = cli.main(_arguments(failed.replay))

    printed = capsys.readouterr().out
    assert code == 1
    assert printed.splitlines()[0] == failed.report().splitlines()[0]  # same steps, same time
    assert str(failed.violations[0]) in printed


def test_given_an_aimed_run_when_its_printed_replay_is_run_then_the_same_run_is_replayed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    triple = ("renew", 9, "crash")
    seed, _ = first_strike(triple)
    assert seed is not None
    aimed = run_aimed_seed(seed, triple)
    strikes = aimed.counts["struck renew 9 crash"]
    assert strikes >= 1

    code = cli.main(_arguments(aimed.replay))

    printed = capsys.readouterr().out
    assert code == 0
    assert printed.splitlines()[0] == aimed.report().splitlines()[0]
    assert f"struck renew 9 crash={strikes}" in printed


def test_given_a_known_bad_variant_when_hunted_then_the_seeds_it_breaks_are_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli.main(["--known-bad", "reaper-leaves-expired-leases", "--seeds", "3"])

    assert code == 0
    assert "stuck in 2 of 3 seeds: [0, 2]" in capsys.readouterr().out


def test_given_an_aim_that_names_no_triple_when_replayed_then_it_is_refused_clearly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--seed", "1", "--aim", "claim,10,crash"])

    assert exited.value.code == 2
    assert "names no triple" in capsys.readouterr().err


def test_given_the_script_when_it_replays_a_seed_then_it_prints_the_run_and_its_replay() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "simulate"), "--seed", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "replay: scripts/simulate --seed 1\n" in done.stdout
    assert done.stdout.startswith("seed 1 (pail): 0 violation(s)")
