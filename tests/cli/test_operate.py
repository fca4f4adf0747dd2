"""``pail stats`` and ``pail reap`` against the real local S3 server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta

from pail import JobState, Pail, SystemClock
from pail.keys import RUN
from pail.protocol.claim import Claimer
from pail.protocol.reaper import CLOCK_RESOLUTION
from tests.cli.handlers import double, explode
from tests.support.command import Invoke


def _fill(connect: Callable[..., Pail]) -> Pail:
    """2 pending, 1 done, 1 dead-lettered."""
    strict = connect(max_retries=0)
    strict.enqueue({"n": 1})
    strict.work_once(double)
    strict.enqueue({"n": 2})
    strict.work_once(explode)
    strict.enqueue({"n": 3})
    strict.enqueue({"n": 4})
    strict.flush()  # the done job's lease removal, which work_once leaves in flight
    return strict


def test_given_jobs_in_every_state_when_stats_json_then_counts_match(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    _fill(connect)

    result = invoke("stats", bucket, "--json")

    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (data["pending"], data["running"], data["done"], data["failed"]) == (2, 0, 1, 1)
    assert data["oldest_pending_age"] >= 0 and data["oldest_pending_at"] is not None


def test_given_jobs_when_stats_human_then_a_table_names_the_bucket_and_counts(
    invoke: Invoke, connect: Callable[..., Pail], bucket: str
) -> None:
    _fill(connect)

    result = invoke("stats", bucket)

    assert result.exit_code == 0
    assert f"s3://{bucket}/" in result.stderr  # off a terminal the title is a note
    header, row = result.stdout.splitlines()
    counts = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert {k: counts.pop(k) for k in ("pending", "delayed", "running", "done", "failed")} == {
        "pending": "2",
        "delayed": "0",
        "running": "0",
        "done": "1",
        "failed": "1",
    }
    assert counts.pop("cancelled") == "0"
    assert counts.pop("waiting") == "0"  # jobs waiting for their dependencies (wait/)
    assert counts.pop("oldest_pending") != "-"
    assert counts == {}  # no other column


def test_given_watch_with_count_when_stats_json_then_one_json_line_per_refresh(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})

    result = invoke("stats", bucket, "--watch", "--count", "3", "--interval", "0.1", "--json")

    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["pending"] for line in lines] == [1, 1, 1]
    assert lines[0]["done_per_s"] is None and lines[1]["done_per_s"] == 0


def test_given_watch_off_a_terminal_when_stats_then_plain_lines(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1})

    result = invoke("stats", bucket, "--watch", "--count", "2", "--interval", "0.1")

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert all("pending=1 delayed=0 waiting=0 running=0 done=0 failed=0" in line for line in lines)


def test_given_nothing_running_when_reap_then_reports_an_empty_complete_pass(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("reap", bucket, "--json")

    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["scanned"] == 0 and report["requeued"] == 0 and report["complete_pass"] is True


def test_given_lease_not_renewed_when_reap_then_job_is_requeued_and_listed(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    job_id = pail.enqueue({"n": 1})
    # A claim with no heartbeat: the worker "died" right after claiming.
    claimer = Claimer(
        pail.store, pail.keys, visibility_timeout=0.1, clock=SystemClock(), owner="dead-worker:1"
    )
    assert claimer.claim() is not None
    _wait_until_expired(pail, visibility_timeout=0.1)

    result = invoke("--visibility-timeout", "0.1", "reap", bucket)

    assert result.exit_code == 0
    assert "requeued           1" in result.stdout
    assert f"requeued       {job_id}" in result.stdout
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    assert status.error is not None and status.error.type == "LeaseExpired"


def test_given_every_and_count_when_reap_then_one_report_per_pass(
    invoke: Invoke, bucket: str
) -> None:
    result = invoke("reap", bucket, "--every", "0.1", "--count", "2", "--json")

    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 2


def _wait_until_expired(pail: Pail, visibility_timeout: float) -> None:
    """Poll the server's clock (list Date - LastModified) until every lease is past its timeout.

    This is the condition the reaper tests; the wait is time passing on the
    server, not a guess at how long something takes.
    """
    threshold = timedelta(seconds=visibility_timeout + CLOCK_RESOLUTION)
    for _ in range(200):
        page = pail.store.list(pail.keys.prefix(RUN))
        if page.items and all(page.server_time - i.last_modified > threshold for i in page.items):
            return
        time.sleep(0.05)
    raise AssertionError("the lease never expired by the server's clock")
