"""The reaper Lambda and the limits a CDK app declares (``PailQueue(concurrency=, rate=)``): synced once per deploy."""

from __future__ import annotations

from pail import MemoryStore, Pail
from pail.aws.reaper import ReaperFunction
from pail.config import ENV_LIMITS
from pail.protocol.limits.rate import Rate
from tests.support.lambdas import FakeContext, LogCapture

DECLARED = '{"concurrency": 3, "rate": {"queue": {"max": 10, "per": 1}}}'


def _reaper(queue: Pail, text: str) -> ReaperFunction:
    return ReaperFunction(
        pail=queue, logger=LogCapture().logger, env={ENV_LIMITS: text}, invoke_worker=print
    )


def test_given_declared_limits_when_the_reaper_first_runs_then_the_bucket_holds_them_once() -> None:
    queue = Pail(MemoryStore("jobs"), shards=1)

    first = _reaper(queue, DECLARED)({}, FakeContext())
    again = _reaper(queue, DECLARED)({}, FakeContext())  # a cold container of the same deploy

    assert first["limits_synced"] is True and again["limits_synced"] is False
    assert queue.limits().concurrency == 3
    assert queue.rate_limits().queue == Rate(10, 1)


def test_given_a_limit_set_at_run_time_when_the_same_deploy_reaps_then_it_stays_until_a_new_declaration() -> (
    None
):
    queue = Pail(MemoryStore("jobs"), shards=1)
    _reaper(queue, DECLARED)({}, FakeContext())
    queue.set_limit(7)

    same = _reaper(queue, DECLARED)({}, FakeContext())
    assert same["limits_synced"] is False and queue.limits().concurrency == 7

    changed = _reaper(queue, '{"concurrency": 2}')({}, FakeContext())
    assert changed["limits_synced"] is True and queue.limits().concurrency == 2
    assert not queue.rate_limits().limited


def test_given_unreadable_declared_limits_when_the_reaper_runs_then_it_still_reaps() -> None:
    queue = Pail(MemoryStore("jobs"), shards=1)

    summary = _reaper(queue, '{"concurrency": "lots"}')({}, FakeContext())

    assert summary["limits_synced"] is None and summary["reap"]["complete_pass"] is True
    assert queue.limits().concurrency is None
