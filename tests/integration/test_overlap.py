"""Issue 17's order of a job's requests, on the real server (``docs/protocol.md``, "The order").

Each test holds one request on the wire (a botocore ``before-send`` hook
waits on an event, bounded) until another has been sent, so it passes only
if the two really travel at once, and fails (after the bounded wait) if the
requests went one after the other: the claim's DELETE beside its HEAD, the
lease's removal after ``work_once`` returned, the next candidate's GET
beside the result's PUT. Requests are counted with ``after-call`` hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pail import Pail, runner
from pail.local import LocalS3
from pail.store import S3Store
from tests.support.counting import RequestCounter
from tests.support.queues import connect_to
from tests.support.wire import Wire


def test_given_a_claim_then_its_delete_and_head_travel_at_once_and_the_handler_starts_after_both(
    s3_server: LocalS3, bucket: str, connect: Callable[..., Pail]
) -> None:
    pail = connect_to(s3_server.connect_kwargs(), bucket)
    wire = Wire(_client(pail))
    reader = connect()
    job_id = reader.enqueue({"n": 1})
    head_sent = wire.signal("HEAD", "/done/")
    delete_held = wire.hold("DELETE", "/queue/", until=head_sent)
    seen: list[object] = []

    def handler(payload: dict[str, int]) -> int:
        # The entry is gone (the DELETE answered) before the handler starts.
        seen.append(reader.store.get(reader.keys.queue(job_id)))
        return payload["n"]

    assert pail.work_once(handler)
    assert pail.flush()

    assert delete_held == [True], "the HEAD of done/ was not sent while the DELETE was held"
    assert seen == [None]
    assert reader.result(job_id) == 1


def test_given_work_once_then_it_returns_before_the_lease_is_removed_and_flush_waits_for_it(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = connect_to(s3_server.connect_kwargs(), bucket)
    wire = Wire(_client(pail))
    job_id = pail.enqueue({"n": 2})
    returned = threading.Event()
    removal = wire.hold("DELETE", "/run/", until=returned)

    assert pail.work_once(lambda payload: payload["n"] * 2)
    # The outcome is written; the lease is still there, beside it, while its
    # removal is held: what a crash here leaves, and the reaper repairs.
    assert pail.result(job_id) == 4
    assert pail.store.head(pail.keys.run(job_id)) is not None
    returned.set()
    assert pail.flush()

    assert removal == [True], "work_once waited for the lease's removal"
    assert pail.store.head(pail.keys.run(job_id)) is None
    assert pail.stats().running == 0


def test_given_a_loop_of_work_once_then_the_next_get_travels_with_the_result_and_a_job_costs_7(
    s3_server: LocalS3, bucket: str
) -> None:
    counter = RequestCounter()
    pail = connect_to(s3_server.connect_kwargs(), bucket, counter=counter)
    wire = Wire(_client(pail))
    assert pail.keys.shards == 1  # reads the layout marker: once per Pail, not per job
    start, gets_before = counter.total(), counter.total("GetObject")
    jobs = 20
    ids = [pail.enqueue({"n": n}) for n in range(jobs)]
    # Job k's result is held until job k + 1's entry is read: one after the
    # other, that read would come only once the result was written.
    held = [
        wire.hold("PUT", f"/done/{ids[k]}", until=wire.signal("GET", f"/queue/{ids[k + 1]}"))
        for k in range(jobs - 1)
    ]

    done = 0
    while pail.work_once(lambda payload: payload["n"]):
        done += 1
    assert pail.flush()

    requests, gets = counter.total() - start, counter.total("GetObject") - gets_before
    per_job = requests / jobs
    assert done == jobs
    assert all(pail.result(job_id) == n for n, job_id in enumerate(ids))
    assert held == [[True]] * (jobs - 1), "a result was written before the next entry was read"
    print(f"\nwork_once loop, {jobs} jobs: {per_job:.2f} requests per job, {gets} GETs")
    assert gets <= jobs + 1  # a read ahead replaces the claim's GET; the last may be spare
    # 7 a job with the enqueue's PUT; one LIST for the page and its pause check (a HEAD),
    # one LIST that found the queue empty (no pause check: nothing to claim), the first
    # claim's reclaim pass over run/ and wait/ (2 LISTs; throttled for a visibility
    # timeout), and the first refill's read of the limits (a GET, once per limits.gate.REFRESH).
    assert requests <= 7 * jobs + 3 + 2 + 1


HELD = 1.0
"""Seconds each lease removal is held in the entry-point test: less than a flush waits."""


def _held_removals(server: LocalS3, bucket: str) -> tuple[Pail, list[bool]]:
    """A queue whose lease removals are each held ``HELD`` seconds: only a flush waits for them."""
    pail = connect_to(server.connect_kwargs(), bucket)
    never = threading.Event()
    return pail, Wire(_client(pail)).hold("DELETE", "/run/", until=never, wait=HELD)


def _leases_left(pail: Pail) -> int:
    return len(pail.store.list(pail.keys.prefix("run/")).items)


def test_given_work_and_the_runner_when_they_return_then_no_lease_removal_is_left_in_flight(
    s3_server: LocalS3, bucket: str
) -> None:
    entry_points: list[Callable[[Pail], object]] = [
        lambda pail: pail.work(lambda payload: payload, max_jobs=2),
        lambda pail: runner.run(
            pail, lambda payload: payload, once=True, max_jobs=2, install_signal_handlers=False
        ),
    ]
    for run in entry_points:
        pail, removals = _held_removals(s3_server, bucket)
        for n in range(2):
            pail.enqueue({"n": n})

        run(pail)

        # Returned only once the held removals landed (their holds timed out).
        assert removals == [False, False]
        assert _leases_left(pail) == 0


def _client(pail: Pail) -> Any:
    """The boto3 client of a queue the test connected (its own, so a ``Wire`` holds only its requests)."""
    store = pail.store
    assert isinstance(store, S3Store)
    return store.client
