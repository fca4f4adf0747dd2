"""The worker Lambda returns only once its jobs' background requests landed (issue 17).

A Lambda freezes after it returns, so a lease removal still in flight then
would wait for the next invocation (the reaper would remove the lease, but
only once it expired). The last job's removal is held on the wire until the
invocation starts its flush (a progress event, not a length of time): it is
surely in flight when the drain ends, and the invocation must not return
before it lands.
"""

from __future__ import annotations

import threading

from pail.aws.lambda_worker import lambda_worker
from pail.local import LocalS3
from pail.protocol.overlap import FLUSH_TIMEOUT
from pail.store import S3Store
from tests.support.lambdas import FakeContext, LogCapture
from tests.support.queues import connect_to
from tests.support.wire import Wire


def test_given_lease_removals_held_on_the_wire_when_invoked_then_it_returns_after_they_land(
    s3_server: LocalS3, bucket: str, log_capture: LogCapture
) -> None:
    queue = connect_to(s3_server.connect_kwargs(), bucket)
    assert isinstance(queue.store, S3Store)
    ids = [queue.enqueue({"n": n}) for n in range(3)]
    flushing = threading.Event()
    flush = queue.flush

    def flush_seen(timeout: float = FLUSH_TIMEOUT) -> bool:
        flushing.set()
        return flush(timeout)

    queue.flush = flush_seen  # type: ignore[method-assign]
    # Held until the flush starts: one at a time, so the pool of 3 never fills with holds.
    # (Bounded at 30 s, reached only if no flush ever starts; then the asserts below fail.)
    held = Wire(queue.store.client).hold("DELETE", f"/run/{ids[-1]}", until=flushing, wait=30)
    handler = lambda_worker(lambda payload: payload["n"], pail=queue, logger=log_capture.logger)

    summary = handler({}, FakeContext(remaining=900))

    assert summary["succeeded"] == 3
    assert held == [True]  # it waited for the flush to start, then was sent
    assert queue.store.list(queue.keys.prefix("run/")).items == ()  # landed before the return
    assert [queue.result(job_id) for job_id in ids] == [0, 1, 2]
