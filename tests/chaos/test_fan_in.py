"""Process chaos on a 40-way fan-in and its continuation, on the real local S3 server (``fan_in.py``).

Four workers run ``Pail.work`` through the fault proxy (5% of requests
dropped, answered 503 or delayed); one is SIGKILLed after every 5 handler
starts, and the one running the merge is SIGKILLed the first time it starts.
The merge must run to its end exactly once, after all 40 children, with all
40 results.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pail.local import LocalS3
from tests.chaos.audit import end_line, read_executions, start_line
from tests.chaos.fan_in import CHILDREN, MERGE, FanInConfig, early_merges, run_fan_in


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(420)  # the run fails by itself once it stops progressing for 60 s
def test_given_sigkilled_workers_when_a_fan_in_runs_then_its_merge_runs_once_after_all_with_all_results(
    s3_server: LocalS3, bucket: str, tmp_path: Path
) -> None:
    config = FanInConfig()

    report = run_fan_in(s3_server, bucket, tmp_path, config)

    print(f"\nfan-in chaos: {report.summary()}")
    assert not report.timed_out, report.summary()
    assert report.children_done == CHILDREN
    # Kills followed progress, and one cut the merge short.
    assert report.kills >= CHILDREN // (2 * config.kill_after_starts)
    assert report.merge_kills == 1 and report.merge_starts >= 2
    # The continuation: one recorded result, after all 40, with all 40 results.
    assert report.merge_results == 1
    assert report.merge_ends >= 1
    assert all(read == list(range(CHILDREN)) for read in report.merge_read), report.merge_read
    assert report.results_in_merge == CHILDREN
    assert report.violations == [], report.violations[:10]
    assert report.stuck == []


def _lease(job: str, token: str, live: float) -> dict[str, object]:
    return {"job": job, "attempt": 1, "lease": token, "owner": "w", "lost": False, "live": live}


def _records(merge_at: float) -> list[str]:
    """Two children that run at 1-2 s and 2-3 s, and a merge run starting at ``merge_at``."""
    return [
        start_line(0, 10, 1.0, _lease("c0", "a", 9.0), "c0"),
        end_line(0, 10, 2.0, _lease("c0", "a", 9.0)),
        start_line(1, 11, 2.0, _lease("c1", "b", 9.0), "c1"),
        end_line(1, 11, 3.0, _lease("c1", "b", 9.0)),
        start_line(MERGE, 12, merge_at, _lease("m", "m", 20.0), "m"),
    ]


def test_given_a_merge_that_starts_before_a_child_ended_then_the_audit_says_which() -> None:
    winners: dict[int, str | None] = {0: "a", 1: "b"}
    in_time = read_executions(_records(merge_at=3.5))
    early = read_executions(_records(merge_at=2.5))

    assert early_merges(in_time, winners, 2) == []
    (found,) = early_merges(early, winners, 2)
    assert "children [1]" in found
    # A child whose result is not the run the merge came after (another lease won) counts as
    # not ended, and a child with no recorded run at all, too.
    assert early_merges(in_time, {0: "a", 1: "other"}, 2) != []
    assert early_merges(in_time, winners, 3) != []
