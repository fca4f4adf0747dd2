"""Many workers, each with its own client, draining one queue on the real server.

These are the issue's acceptance figures, asserted as budgets (counts, never
timings): 16 threads drain 400 jobs with no duplicate execution and at most
0.2 failed conditional writes per claim, with nothing left stuck; a worker
alone spends exactly 7 requests per job from enqueue to result (PUT; GET,
PUT, DELETE, HEAD; PUT, DELETE) and lists at most 0.05 times per claim
against a backlog larger than a listing page (1,500 jobs: the issue measured
5,000; see ``BACKLOG``).

Racing workers spend a little more than 7 per job: a worker that meets a
job another has just taken pays a GET (or a failed PUT) and, after two such
misses, a new listing. Each listing that finds jobs also costs one HEAD of
the pause marker (issue 14), and each worker's Pail reads the layout marker
once (issue 16: 16 GETs on 400 jobs). Measured here: about 7.7 per job with
16 workers on 400 jobs before those two; 7.9-8.05 with them (0.19-0.23 LIST
per claim, so as many pause HEADs). Each worker's claims also run a reclaim
pass, the first on its first claim and then one per visibility timeout
(``pail.protocol.reclaim``): 16 LISTs of ``run/`` here, 0.04 per job;
measured with them, 7.83. Since limits and dependencies, each worker's Pail
also reads the limits object (``_pail/limits``, a 404 on this queue) at most
once per 5 s at a refill that found jobs, and each reclaim pass lists
``wait/`` too: 16 GETs and 16 LISTs here, 0.08 per job together. Measured
with both: 7.99-8.20 at load 13. The budget below is 8.4 (8.3 before those
two costs).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pail import Pail
from pail.local import LocalS3
from pail.protocol.claim import DEFAULT_PAGE_SIZE
from tests.support.counting import RequestCounter
from tests.support.queues import connect_to

WORKERS = 16
JOBS = 400
CLAIMS = 200
BACKLOG = 1_500
"""More than a listing page (``DEFAULT_PAGE_SIZE``, 1,000 keys) plus the claims: every claim finds a full first page
and a second page behind it, so a claim that paged through the queue (as 0.1.1 listed all of
it) would send 2 LISTs per claim, not at most 0.05. The issue's 5,000 proves no more, at 3.3x
the PUTs; ``scripts/bench`` measures 5,000 and 10,000."""


def connect(server: LocalS3, bucket: str, counter: RequestCounter, **options: Any) -> Pail:
    return connect_to(server.connect_kwargs(), bucket, counter=counter, **options)


@pytest.mark.slow
def test_given_16_workers_when_draining_400_jobs_then_each_runs_once_within_request_budget(
    s3_server: LocalS3, bucket: str
) -> None:
    counter = RequestCounter()
    producer = connect(s3_server, bucket, counter)
    ids = [producer.enqueue({"i": i}) for i in range(JOBS)]
    executions: Counter[str] = Counter()
    lock = threading.Lock()
    claims = Counter[str]()

    def drain(worker: int) -> None:
        pail = connect(s3_server, bucket, counter)

        def handler(payload: dict[str, int]) -> dict[str, int]:
            with lock:
                executions[ids[payload["i"]]] += 1
            return {"square": payload["i"] ** 2}

        while pail.work_once(handler):
            with lock:
                claims[str(worker)] += 1
        pail.flush()  # the last lease removals: work_once does not wait for them
        with lock:
            claims["failed_conditions"] += pail.write_stats.failed_conditions

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(drain, range(WORKERS)))

    successful_claims = sum(n for k, n in claims.items() if k != "failed_conditions")
    assert successful_claims == JOBS
    assert set(executions) == set(ids)
    assert max(executions.values()) == 1, "a job ran twice"
    failed_per_claim = counter.failed_conditional_writes() / JOBS
    requests_per_job = counter.total() / JOBS
    print(
        f"\n16 workers x {JOBS} jobs: {failed_per_claim:.3f} failed conditional writes per claim, "
        f"{requests_per_job:.2f} requests per job, {counter.total('ListObjectsV2') / JOBS:.3f} "
        f"LIST per claim; by operation: {dict(counter.calls)}"
    )
    assert failed_per_claim <= 0.2
    assert requests_per_job <= 8.4
    stats = producer.stats()
    assert (stats.pending, stats.running, stats.done, stats.failed) == (0, 0, JOBS, 0)
    assert all(producer.result(job_id) is not None for job_id in ids[:20])


@pytest.mark.slow
def test_given_a_backlog_beyond_a_page_when_claiming_then_lists_at_most_005_per_claim(
    s3_server: LocalS3, bucket: str
) -> None:
    assert BACKLOG > DEFAULT_PAGE_SIZE + CLAIMS  # a full page for every claim, and one behind it
    counter = RequestCounter()
    pail = connect(s3_server, bucket, counter)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: pail.enqueue({"i": i}), range(BACKLOG)))
    lists_before, requests_before = counter.total("ListObjectsV2"), counter.total()

    claims = 0
    for _ in range(CLAIMS):
        message = pail.claim()
        assert message is not None
        message.complete({"i": message.payload["i"]})
        claims += 1
    pail.flush()  # count the last lease removal too

    lists = counter.total("ListObjectsV2") - lists_before
    per_job = 1 + (counter.total() - requests_before) / claims  # + the enqueue PUT
    print(
        f"\nbacklog {BACKLOG}: {lists / claims:.3f} LIST per claim, {per_job:.3f} requests per job"
    )
    assert lists / claims <= 0.05
    assert per_job <= 7.05
