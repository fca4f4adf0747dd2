"""Process chaos against the real local S3 server (the CI variant; ``scripts/chaos`` runs 2,000 jobs).

Four worker processes run ``Pail.work`` through a fault-injecting proxy
(5% of requests dropped before or after reaching the server, answered 503
SlowDown, or delayed); after every 8 handler starts one of the workers that
has started a job is SIGKILLed and restarted (kills follow progress, so the
run proves the same on an idle and a loaded machine), and ``reap()`` runs
every second. See ``runner.py`` for the audit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pail.local import LocalS3
from tests.chaos.proxy import ProxyFault
from tests.chaos.runner import ChaosConfig, run_chaos


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
    assert report.unexplained == [], report.unexplained[:10]
    assert report.executions >= config.jobs
