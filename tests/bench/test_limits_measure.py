"""``scripts/limits-measure --quick`` on the local server: the limits hold, measured end to end.

Small and on a shared machine, so nothing here looks at a timing or a cost
figure: 16 workers under a limit of 3 run 3 handlers at once and never more
(each quick-run handler waits until 3 run, so the limit binds at any load); a
rate of 5/s never starts more than 5 in a second of the server's clock; a
small group behind a big one starts sooner than oldest-first lets it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.s3, pytest.mark.slow]


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("limits") / "limits.json"
    done = subprocess.run(
        [str(ROOT / "scripts" / "limits-measure"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def test_given_16_workers_and_a_limit_of_3_then_at_most_3_handlers_ran_at_once(
    figures: dict[str, Any],
) -> None:
    for pair in figures["concurrency"]["rounds"]:
        limited = pair["limit_3"]
        assert limited["completed"] >= 24
        assert limited["most_running_at_a_start"] == 3
        assert limited["most_running_sampled"] <= 3 and limited["samples"] > 0


def test_given_a_rate_of_5_a_second_then_no_second_of_the_server_clock_started_more(
    figures: dict[str, Any],
) -> None:
    rated = figures["rate"]
    assert rated["completed"] >= 15
    assert rated["most_tokens_in_a_window"] <= 5
    assert rated["most_starts_in_a_second"] <= 5


def test_given_a_small_group_behind_a_big_one_then_it_starts_sooner_than_oldest_first(
    figures: dict[str, Any],
) -> None:
    fair, fifo = figures["fairness"]["group_limit_2"], figures["fairness"]["oldest_first"]
    assert len(fair["small_group_starts_at_claims"]) == 10
    assert len(fifo["small_group_starts_at_claims"]) == 10
    assert fair["last_small_start"] < fifo["last_small_start"]
