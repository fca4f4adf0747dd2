"""The nightly-report example (``examples/nightly_report``) on the real local S3 server, as written.

"At 02:00, export each of 40 regions, then merge them into one report": the
02:00 schedule's tick (made due by a producer clock a day back, not by
waiting), a plan job that fans out 40 exports and a merge that waits for all
of them and reads their 40 results; through the API (``run_api.py``) and
through the CLI (``walkthrough.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from tests.support.command import process_env, start

pytestmark = pytest.mark.s3

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nightly_report"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(EXAMPLE))  # run_api imports report from beside it
    try:
        spec = importlib.util.spec_from_file_location(f"nightly_{name}", EXAMPLE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))


def _expected(report: ModuleType, date: str) -> tuple[int, float]:
    exports = [report.export(region, date) for region in report.REGIONS]
    return sum(e["orders"] for e in exports), round(sum(e["revenue"] for e in exports), 2)


def test_given_the_api_script_when_the_night_runs_then_one_plan_40_exports_and_a_merge_of_all_40(
    pail: Pail,
) -> None:
    run_api, report = _load("run_api"), _load("nightly")

    night = run_api.night(pail)

    merged = night["report"]
    assert len(report.REGIONS) == 40 and len(set(night["exports"])) == 40
    assert (merged["regions"], (merged["orders"], merged["revenue"])) == (
        40,
        _expected(report, night["date"]),
    )
    assert merged["text"].startswith(f"Nightly report, {night['date']}")
    states = {job: pail.status(job) for job in night["exports"]}
    assert all(s is not None and s.state is JobState.DONE for s in states.values())
    # The tick was the schedule's: it names the plan, and a second pass enqueues nothing more.
    (schedule,) = pail.schedules()
    assert (schedule.name, schedule.last_job) == ("nightly-report", night["plan"])
    assert schedule.schedule.timing.cron == "0 2 * * *"
    pail.reap()
    stats = pail.stats()
    assert (stats.pending, stats.running, stats.waiting) == (0, 0, 0)


def test_given_the_shell_walkthrough_when_run_then_it_prints_the_merged_report_of_40_regions(
    s3_server: LocalS3, bucket: str
) -> None:
    report = _load("nightly")
    env = process_env(s3_server.env())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    process = start(["bash", str(EXAMPLE / "walkthrough.sh"), bucket], env, start_new_session=True)
    try:
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    assert process.returncode == 0, err
    assert "nightly-report" in out and "0 2 * * *" in out
    assert "waiting" in out  # the merge's status before the exports ran
    date = next(line for line in out.splitlines() if line.startswith("Nightly report, "))[16:]
    orders, revenue = _expected(report, date)
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert total.split()[1:] == [str(orders), f"{revenue:,.2f}"]
    assert "40 regions" in out
