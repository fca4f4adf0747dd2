"""``scripts/bench --quick`` runs end to end: the original and pail side by side on one server.

The quick run is small and the machine is shared, so nothing here looks at a
timing. It checks that the run produced its files and every figure, and the
invariants that do not depend on speed: pail runs every job exactly once,
claims without listing each time, and never loses a conditional write when
it works alone; the original lists the queue on every claim.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "meta",
    "server",
    "claim_path",
    "contention",
    "idle",
    "latency",
    "summary",
    "per_job",
    "summary_per_job",
    "partitions",
    "summary_partitions",
)

# The run's own bound is its progress (``STALL_LIMIT``); this only stops a wedged test.
pytestmark = [pytest.mark.s3, pytest.mark.slow, pytest.mark.timeout(1800)]


def _lists_per_claim(step: dict[str, Any]) -> float:
    lists = sum(n for key, n in step["claim_requests"].items() if key.startswith("ListObjectsV2"))
    return float(lists / step["claims"])


STALL_LIMIT = 240.0
"""The run fails once its log (a line per driver run, a few seconds each) says nothing this long."""


def _run_while_progressing(command: list[str]) -> tuple[int, str, str]:
    """Run ``command`` to its end, or kill it once its stderr has been silent ``STALL_LIMIT`` s.

    Tied to progress, not to a total: a loaded machine takes longer (a quick run at load 14
    went past the 240 s it once had), a hung run still fails.
    """
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    heard = [time.monotonic()]

    def pump(stream: IO[str], into: list[str]) -> None:
        for line in stream:
            into.append(line)
            heard[0] = time.monotonic()

    pumps = [
        threading.Thread(target=pump, args=(stream, into), daemon=True)
        for stream, into in ((process.stdout, out), (process.stderr, err))
    ]
    for thread in pumps:
        thread.start()
    try:
        while process.poll() is None:
            if time.monotonic() - heard[0] > STALL_LIMIT:
                process.kill()
                process.wait()
                pytest.fail(f"scripts/bench --quick said nothing for {STALL_LIMIT:.0f} s")
            time.sleep(0.5)  # polling the run's liveness; the pumps read its output
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for thread in pumps:
            thread.join(timeout=10)
    return process.returncode, "".join(out), "".join(err)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("bench")
    returncode, stdout, stderr = _run_while_progressing(
        [str(ROOT / "scripts" / "bench"), "--quick", "--out", str(out)]
    )
    assert returncode == 0, stderr[-4000:]
    return out, stdout


@pytest.fixture(scope="module")
def results(quick_run: tuple[Path, str]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((quick_run[0] / "results.json").read_text())
    return loaded


def test_given_quick_run_when_it_ends_then_it_writes_the_table_json_and_plot(
    quick_run: tuple[Path, str], results: dict[str, Any]
) -> None:
    out, stdout = quick_run
    assert set(SECTIONS) <= set(results)
    assert "| figure | original 0.1.1 | pail | ratio | target | met |" in stdout
    assert (out / "results.md").read_text() in stdout
    for plot in ("plot.png", "per_job.png", "partitions.png"):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_given_quick_run_then_both_sides_ran_their_own_package(results: dict[str, Any]) -> None:
    original = results["meta"]["original"]
    assert original["version"] == "0.1.1"
    assert ".bench-venv" in original["module"]
    assert original["files_verified"] > 0
    assert results["claim_path"]["pail"]["version"] != "0.1.1"
    assert ".bench-venv" not in results["claim_path"]["pail"]["module"]


def test_given_quick_run_then_every_figure_of_issue_7_is_in_the_summary(
    results: dict[str, Any],
) -> None:
    names = " | ".join(row["name"] for row in results["summary"])
    for figure in (
        "LIST per claim",
        "$ per million jobs",
        "claim time",
        "failed conditional writes per claim",
        "duplicate executions",
        "throughput",
        "enqueue → claim",
        "idle requests per minute",
    ):
        assert figure in names
    ceiling = results["server"]["ceiling"]["ops_per_second"]
    assert all(rate > 0 for rates in ceiling.values() for rate in rates.values())


def test_given_pail_racing_workers_then_every_job_ran_exactly_once(
    results: dict[str, Any],
) -> None:
    for run in results["contention"]["pail"]:
        assert run["errors"] == 0, run["error_samples"]
        assert run["claims"] == run["jobs"] == run["unique_executed"]
        assert run["duplicates"] == 0
        assert run["executions"] == run["jobs"]


def test_given_one_pail_worker_then_no_write_loses_and_a_job_costs_few_requests(
    results: dict[str, Any],
) -> None:
    alone = next(r for r in results["contention"]["pail"] if r["workers"] == 1)
    assert alone["failed_conditions"] == 0
    # GET, PUT, DELETE, HEAD to claim; PUT, DELETE to complete; a LIST now and then.
    assert alone["requests_per_job"] <= 7


def test_given_a_backlog_then_pail_claims_from_a_cached_listing_and_the_original_lists_each_time(
    results: dict[str, Any],
) -> None:
    for step in results["claim_path"]["pail"]["steps"]:
        assert _lists_per_claim(step) <= 0.1, step
    for step in results["claim_path"]["original"]["steps"]:
        assert _lists_per_claim(step) >= 1, step


def test_given_one_worker_behind_delaying_fronts_then_every_job_ran_once_and_was_delayed(
    results: dict[str, Any],
) -> None:
    section = results["per_job"]
    for side in ("pail", "original"):
        (run,) = section["runs"][side]
        assert run["duplicates"] == 0 and run["executions"] == run["unique_executed"]
        for lane in run["lanes"]:
            applied = run["applied_ms"][f"{lane['delay_ms']:g}"]
            assert applied >= lane["delay_ms"]  # a sleep never ends early
            assert lane["jobs"] == len(lane["ms"]) == section["plan"]["jobs"]
            if side == "pail":  # one LIST serves a page of claims
                assert lane["requests_per_job"] <= 7, lane
            else:  # LIST, GET, PUT, DELETE to claim; PUT, DELETE to complete
                assert lane["requests_per_job"] >= 6, lane
    names = " | ".join(row["name"] for row in results["summary_per_job"])
    assert "sequential round trips per job above the no-delay cost, 20 ms" in names


def test_given_the_partition_model_then_it_never_admits_more_than_its_rate_and_loses_nothing(
    results: dict[str, Any],
) -> None:
    (layout,) = results["partitions"]["layouts"]
    (run,) = layout["runs"]
    model = run["model"]
    (partition,) = model["partitions"]
    writes = partition["admitted"].get("write", 0)
    # A full bucket of one second, then the rate: never more, however the machine runs.
    assert writes <= model["rates"]["writes"] * (run["wall_seconds"] + 1)
    assert run["audit"]["lost"] == 0 and run["duplicates"] == 0
    assert run["audit"]["jobs"] == run["enqueued"] > 0
    assert sum(run["audit"]["by_place"].values()) == run["enqueued"]
