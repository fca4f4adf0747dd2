"""Process chaos against the real local S3 server (the CI variant; ``scripts/chaos`` runs 2,000 jobs).

Four worker processes run ``Pail.work`` through a fault-injecting proxy
(5% of requests dropped before or after reaching the server, answered 503
SlowDown, or delayed); after every 8 handler starts one of the workers that
has started a job is SIGKILLed and restarted (kills follow progress, so the
run proves the same on an idle and a loaded machine), and ``reap()`` runs
every second. See ``runner.py`` and ``audit.py`` for the audit.

The audit can fail: each known-bad worker of ``worker_main`` (one that runs
handlers without claiming, one that runs on after its lease expired under
it, sure it still holds it) is run through the same run and audit, and must
be caught by the rule it breaks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pail.local import LocalS3
from tests.chaos.proxy import ProxyFault
from tests.chaos.runner import ChaosConfig, run_chaos
from tests.chaos.worker_main import KNOWN_BAD


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(720)  # the run fails by itself once it stops progressing for 60 s
def test_given_sigkilled_workers_and_faulty_network_when_draining_then_nothing_lost_stuck_or_changed(
    s3_server: LocalS3, bucket: str, tmp_path: Path
) -> None:
    config = ChaosConfig()

    report = run_chaos(s3_server, bucket, tmp_path, config)

    print(f"\nchaos: {report.summary()}")
    assert not report.timed_out, report.summary()
    assert report.jobs == config.jobs
    # Kills follow progress (one per 8 starts, once a worker is eligible), whatever the speed.
    assert report.kills >= config.jobs // (2 * config.kill_after_starts)
    assert all(report.faults[fault] > 0 for fault in ProxyFault), report.faults
    assert report.lost == []
    assert report.stuck == []
    assert report.changed == [] and report.sampled > 0
    assert report.violations == [], report.violations[:10]
    assert report.jobs_run == config.jobs
    # Every run after a job's first is a duplicate the audit explained, or a violation above.
    assert sum(report.duplicates.values()) == report.executions - report.jobs_run


CAUGHT_BY = {"unleased": "ran without a lease", "long-lease": "overlap with a live lease"}


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("known_bad", KNOWN_BAD)
def test_given_a_known_bad_worker_when_audited_then_the_rule_it_breaks_catches_it(
    s3_server: LocalS3, bucket: str, tmp_path: Path, known_bad: str
) -> None:
    # No kills and no faults: only the bad worker can break a rule. The good workers start
    # once it is up (the fleet waits for it), so every job is still pending when it lists
    # or claims: it breaks its rule on its first job, however few there are.
    config = ChaosConfig(
        jobs=10, workers=2, kill_after_starts=10**6, fault_rate=0.0, sample=5, known_bad=known_bad
    )

    report = run_chaos(s3_server, bucket, tmp_path, config)

    print(f"\nchaos with known-bad worker {known_bad!r}: {report.summary()}")
    assert not report.timed_out, report.summary()
    assert report.kills == 0
    assert report.violation_kinds[CAUGHT_BY[known_bad]] > 0, report.summary()
