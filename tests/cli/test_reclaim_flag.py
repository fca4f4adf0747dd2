"""``pail work``/``work-once`` reclaim expired leases from their claims unless ``--no-reclaim``."""

from __future__ import annotations

import json
from datetime import timedelta

from pail import JobState, Pail, SystemClock
from pail.protocol.claim import Claimer
from pail.protocol.reaper import CLOCK_RESOLUTION
from tests.support.command import Invoke
from tests.support.waiting import wait_until

VT = "0.2"


def _dead_worker_holds_a_job(pail: Pail) -> str:
    """A job claimed by a worker that died at once: its lease is never renewed; wait until expired."""
    job_id = pail.enqueue({"n": 21})
    claimer = Claimer(
        pail.store, pail.keys, visibility_timeout=float(VT), clock=SystemClock(), owner="dead:1"
    )
    assert claimer.claim() is not None
    threshold = timedelta(seconds=float(VT) + CLOCK_RESOLUTION)

    def expired() -> bool:  # by the server's clock, as the reaper judges it
        page = pail.store.list(pail.keys.prefix("run/"))
        return bool(page.items) and all(
            page.server_time - item.last_modified > threshold for item in page.items
        )

    wait_until(expired, timeout=30, what="the dead worker's lease to expire")
    return job_id


def test_given_a_dead_worker_s_job_when_work_once_with_no_reclaim_then_it_stays_and_without_it_runs(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = _dead_worker_holds_a_job(pail)
    args = (
        "--visibility-timeout",
        VT,
        "work-once",
        bucket,
        "--handler",
        "tests.cli.handlers:double",
    )

    off = invoke(*args, "--no-reclaim")
    held = pail.status(job_id)
    on = invoke(*args)

    assert json.loads(off.stdout.splitlines()[-1])["processed"] == 0
    assert "not reclaiming" in off.stderr
    assert held is not None and held.state is JobState.RUNNING
    assert json.loads(on.stdout.splitlines()[-1])["processed"] == 1
    assert "reclaiming expired leases every 0.2 s" in on.stderr
    assert pail.result(job_id) == {"n": 42}
