"""A one-shot reaper reaches an expired lease behind any number of live ones.

Each pass reads a bounded number of pages of ``run/`` and the position it
stopped at is kept in the bucket, so passes made by fresh processes (a cron
``reap()``, ``pail reap``, a cold reaper Lambda) walk the whole of ``run/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta

from pail import JobState, ManualClock, MemoryStore, Pail
from pail.codec import LeaseRecord
from pail.keys import RUN
from pail.local import LocalS3
from pail.protocol.claim import Claimer
from pail.protocol.reaper import passes_to_cover
from tests.support.clocks import ServerClock
from tests.support.command import ROOT
from tests.support.waiting import wait_until

TIMEOUT = 30.0


def put_lease(store: MemoryStore, queue: Pail, job_id: str) -> None:
    record = LeaseRecord(job_id, {"n": job_id}, 1, "worker", "lease")
    store.put(queue.keys.run(job_id), record.encode(), if_none_match=True)


def test_given_an_expired_lease_behind_10000_live_ones_when_reaped_one_shot_then_it_is_reclaimed() -> (
    None
):
    server = ServerClock()
    store = MemoryStore("jobs", now=server)
    expired = "01K" + "0" * 23  # sorts after every live lease
    put_lease(store, Pail(store), expired)
    server.now += timedelta(seconds=TIMEOUT + 5)
    live = 10_000
    for n in range(live):
        put_lease(store, Pail(store), f"01J{n:023d}")
    bound = passes_to_cover(live + 1)

    passes, scanned = 0, 0
    while passes < bound:
        passes += 1
        report = Pail(store, visibility_timeout=TIMEOUT).reap()  # a fresh process each time
        scanned += report.scanned
        if expired in report.requeued_ids:
            break

    print(
        f"\nexpired lease behind {live} live ones: reclaimed by one-shot pass {passes} "
        f"(documented bound {bound}), {scanned} leases scanned"
    )
    fresh = Pail(store, visibility_timeout=TIMEOUT)
    status = fresh.status(expired)
    assert status is not None and status.state is JobState.PENDING
    assert passes <= bound
    assert len(store.list(fresh.keys.prefix(RUN), max_keys=live + 1).items) == live


def reap_in_a_fresh_process(
    s3_server: LocalS3, bucket: str, before_the_pass: Callable[[], None]
) -> dict[str, object]:
    """One pass in a new interpreter; ``before_the_pass`` runs once it is ready, just before it lists."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.aws.reap_once",
            bucket,
            s3_server.endpoint_url,
            "--visibility-timeout",
            "2",
            "--page-size",
            "10",
            "--max-pages",
            "2",
            "--wait",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        before_the_pass()
        out, _ = process.communicate("go\n", timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    report: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return report


def test_given_leases_past_one_pass_on_the_server_when_fresh_processes_reap_then_they_walk_on(
    s3_server: LocalS3, bucket: str, connect: Callable[..., Pail]
) -> None:
    queue = connect(visibility_timeout=2)
    for n in range(30):
        queue.enqueue({"n": n})
    claimed = [queue.claim() for _ in range(30)]  # 30 live leases, renewed every 0.67 s
    working = [message for message in claimed if message is not None]
    assert len(working) == 30
    crashed = queue.enqueue({"n": "crashed"})
    claimer = Claimer(
        queue.store, queue.keys, visibility_timeout=2, clock=ManualClock(), owner="crashed"
    )
    lease = claimer.claim()
    assert lease is not None and lease.job_id == crashed  # sorts after the 30
    run_key = queue.keys.run(crashed)

    def expired() -> bool:
        page = queue.store.list(run_key)
        return (
            bool(page.items)
            and (page.server_time - page.items[0].last_modified).total_seconds() > 3
        )

    def every_live_lease_renewed() -> None:
        # Progress, not a race: each heartbeat has renewed its lease since the reaper
        # process became ready, so none is near its expiry when the pass lists.
        before = [message.lease.etag for message in working]
        wait_until(
            lambda: all(
                message.lease.etag != etag or message.lease_lost
                for message, etag in zip(working, before, strict=True)
            ),
            30,
            what="a renewal of every live lease",
        )
        assert not [message.id for message in working if message.lease_lost]

    completed: list[bool] = []
    try:
        wait_until(expired, 30)
        reports = []
        for _ in range(passes_to_cover(31, page_size=10, max_pages=2)):
            reports.append(reap_in_a_fresh_process(s3_server, bucket, every_live_lease_renewed))
            if crashed in reports[-1]["requeued_ids"]:  # type: ignore[operator]
                break
    finally:
        completed = [message.complete({"done": True}) for message in working]

    print(f"\n31 leases, pages of 10, 2 per pass: reclaimed by fresh process {len(reports)}")
    assert crashed in reports[-1]["requeued_ids"]  # type: ignore[operator]
    assert reports[0]["scanned"] == 20 and crashed not in reports[0]["requeued_ids"]  # type: ignore[operator]
    # The 30 heartbeats kept their leases through every pass: only the crashed one was taken.
    assert [report["requeued_ids"] for report in reports[:-1]] == [[]] * (len(reports) - 1)
    assert reports[-1]["requeued_ids"] == [crashed]
    assert completed == [True] * 30
    status = queue.status(crashed)
    assert status is not None and status.state is JobState.PENDING


def test_given_a_garbled_cursor_when_reaped_then_the_pass_starts_from_the_top() -> None:
    server = ServerClock()
    store = MemoryStore("jobs", now=server)
    queue = Pail(store, visibility_timeout=TIMEOUT)
    expired = "01J" + "0" * 23
    put_lease(store, queue, expired)
    for body in (b"\xff{not json", b'{"after": "queue/elsewhere"}', b"[1, 2]"):
        store.put(queue.keys.reap_cursor(), body)
    server.now += timedelta(seconds=TIMEOUT + 5)

    report = Pail(store, visibility_timeout=TIMEOUT).reap()

    assert report.requeued_ids == [expired]
    assert report.complete_pass
