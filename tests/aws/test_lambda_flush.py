"""The worker Lambda returns only once its jobs' background requests landed (issue 17).

A Lambda freezes after it returns, so a lease removal still in flight then
would wait for the next invocation (the reaper would remove the lease, but
only once it expired). The removals are held on the wire for a while: the
invocation must not return before they land.
"""

from __future__ import annotations

import threading

from pail.aws.lambda_worker import lambda_worker
from pail.local import LocalS3
from pail.store import S3Store
from tests.support.lambdas import FakeContext, LogCapture
from tests.support.queues import connect_to
from tests.support.wire import Wire

HELD = 1.0
"""Seconds each lease removal is held: less than a flush waits for them."""


def test_given_lease_removals_held_on_the_wire_when_invoked_then_it_returns_after_they_land(
    s3_server: LocalS3, bucket: str, log_capture: LogCapture
) -> None:
    queue = connect_to(s3_server.connect_kwargs(), bucket)
    assert isinstance(queue.store, S3Store)
    removals = Wire(queue.store.client).hold("DELETE", "/run/", until=threading.Event(), wait=HELD)
    ids = [queue.enqueue({"n": n}) for n in range(3)]
    handler = lambda_worker(lambda payload: payload["n"], pail=queue, logger=log_capture.logger)

    summary = handler({}, FakeContext(remaining=900))

    assert summary["succeeded"] == 3
    assert removals == [False, False, False]  # each held its full time, then sent
    assert queue.store.list(queue.keys.prefix("run/")).items == ()
    assert [queue.result(job_id) for job_id in ids] == [0, 1, 2]
