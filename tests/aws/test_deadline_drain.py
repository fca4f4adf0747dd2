"""The worker Lambda near its deadline, on the real local S3 server.

A Lambda context whose remaining time shrinks with every S3 request stands
for a slow S3 (throttling, botocore backing off): claims end later than they
started, sometimes inside the safety margin. No job may start there; such a
job goes back to the queue without spending an attempt, and a release is
never held back by a retry backoff.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pail import JobState, Pail, RetryPolicy
from pail.aws.lambda_worker import lambda_worker
from pail.codec import META_ATTEMPT
from tests.support.lambdas import FakeContext, LogCapture

MARGIN = 4.0
RESERVE = 2.0


class SlowS3:
    """Spends ``per_request`` seconds of the current invocation on every S3 request the drain waits for.

    Requests sent from the worker's overlap pool (``pail-overlap`` threads)
    travel beside one the drain waits for, or after its job (a lease
    removal): they spend no time of their own.
    """

    def __init__(self, queue: Pail, per_request: float) -> None:
        self.context: FakeContext | None = None
        self.per_request = per_request
        queue.store.client.meta.events.register("before-send.s3", self._sent)  # type: ignore[attr-defined]

    def _sent(self, **_: Any) -> None:
        if threading.current_thread().name.startswith("pail-overlap"):
            return
        if self.context is not None:
            self.context.advance(self.per_request)


@dataclass
class Runs:
    """What the handler saw: each start's remaining time, runs per job, and any overlap."""

    context: Callable[[], FakeContext | None]
    started_with: list[float] = field(default_factory=list)
    per_job: Counter[str] = field(default_factory=Counter)
    overlaps: int = 0
    _running: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, seconds: float) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def run(payload: dict[str, Any]) -> dict[str, Any]:
            context = self.context()
            assert context is not None
            job = str(payload["n"])
            with self._lock:
                self.started_with.append(context.get_remaining_time_in_millis() / 1000)
                self.per_job[job] += 1
                self.overlaps += job in self._running
                self._running.add(job)
            context.advance(seconds)  # the job's work, in invocation time
            with self._lock:
                self._running.discard(job)
            return {"n": payload["n"]}

        return run


def test_given_a_deadline_that_shrinks_faster_than_jobs_run_then_no_job_starts_inside_the_margin(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    # max_retries=0 and a one-hour backoff: a return that spent an attempt would
    # dead-letter the job, and one held back by the backoff would never finish.
    queue = connect(max_retries=0, retry_policy=RetryPolicy.fixed(3600))
    ids = {queue.enqueue({"n": n}): str(n) for n in range(30)}
    slow = SlowS3(queue, per_request=0.6)
    runs = Runs(context=lambda: slow.context)
    handler = lambda_worker(
        runs.handler(1.0),
        pail=queue,
        safety_margin=MARGIN,
        release_reserve=RESERVE,
        logger=log_capture.logger,
    )
    rng = random.Random(18)
    totals: Counter[str] = Counter()
    for _ in range(200):  # a bound, far above what 30 jobs need
        # Only the S3 requests and the jobs spend the invocation's time: on a busy machine,
        # the real millisecond between the worker's last check and the handler's first
        # reading once showed a start at 3.999 s left, which the worker had judged at 4.0.
        slow.context = FakeContext(remaining=rng.uniform(MARGIN + 0.5, 9.0), real_time=False)
        summary = handler({}, slow.context)
        totals.update(
            {k: summary.get(k, 0) for k in ("processed", "returned", "released", "failed")}
        )
        if summary["stop_reason"] == "empty":
            break

    inside_margin = [left for left in runs.started_with if left < MARGIN]
    statuses = {job_id: queue.status(job_id) for job_id in ids}
    lost = [job_id for job_id, s in statuses.items() if s is None or s.state is not JobState.DONE]
    attempts = Counter(
        queue.store.head(queue.keys.done(job_id)).metadata[META_ATTEMPT]  # type: ignore[union-attr]
        for job_id in ids
        if job_id not in lost
    )
    print(
        f"\n30 jobs, margin {MARGIN} s, 0.6 s per S3 request, 1 s per job: "
        f"{totals['returned']} returned unstarted, {len(inside_margin)} started inside the margin, "
        f"attempts per finished job {dict(attempts)}, {len(lost)} lost, "
        f"{runs.overlaps} run in parallel, {totals['released']} released mid-run"
    )
    assert inside_margin == []
    assert lost == []
    assert attempts == {"1": 30}  # a return never spent an attempt
    assert totals["returned"] > 0, "the schedule must make some claims end inside the margin"
    assert runs.overlaps == 0
    assert set(runs.per_job.values()) == {1}
    assert (totals["released"], totals["failed"]) == (0, 0)


def test_given_a_retry_backoff_when_a_running_job_is_released_then_it_is_claimable_at_once(
    connect: Callable[..., Pail], log_capture: LogCapture, gate: threading.Event
) -> None:
    queue = connect(retry_policy=RetryPolicy.fixed(30))
    job_id = queue.enqueue({"n": 1})
    context = FakeContext(remaining=20)

    def overruns(payload: dict[str, Any]) -> None:
        context.advance(16)  # 4 s left: below the 5 s release reserve
        gate.wait(60)

    handler = lambda_worker(overruns, pail=queue, safety_margin=10, logger=log_capture.logger)
    summary = handler({}, context)

    assert (summary["released"], summary["retried"]) == (1, 1)
    status = queue.status(job_id)
    assert status is not None
    assert (status.state, status.attempts) == (JobState.PENDING, 1)
    assert status.error is not None and status.error.type == "LeaseReleased"
    message = connect().claim()  # at once: no 30 s backoff, no reaper pass
    assert message is not None
    assert (message.id, message.attempt) == (job_id, 2)
    assert message.complete({"second": "attempt"})


def test_given_no_retries_left_when_a_claim_ends_inside_the_margin_then_the_job_is_not_dead_lettered(
    connect: Callable[..., Pail], log_capture: LogCapture
) -> None:
    queue = connect(max_retries=0)
    job_id = queue.enqueue({"n": 1})
    slow = SlowS3(queue, per_request=0.0)
    ran: list[Any] = []
    handler = lambda_worker(
        ran.append, pail=queue, safety_margin=4, release_reserve=2, logger=log_capture.logger
    )
    # 5 s left when the claim starts; its four requests take 1.5 s: 3.5 s left, inside the margin.
    # Only those requests spend time, so a busy machine cannot stop the drain before its claim.
    slow.context, slow.per_request = FakeContext(remaining=5.0, real_time=False), 0.375

    summary = handler({}, slow.context)

    assert ran == []
    assert (summary["processed"], summary["returned"], summary["stop_reason"]) == (
        0,
        1,
        "time_budget",
    )
    status = queue.status(job_id)
    assert status is not None
    assert (status.state, status.attempts, status.error) == (JobState.PENDING, 0, None)
    message = connect().claim()
    assert message is not None and message.attempt == 1
