"""The reaper Lambda and the schedules a CDK app declares: synced on its first run, ticked every run."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pail import MemoryStore, Pail
from pail.aws.reaper import ReaperFunction
from pail.config import ENV_SCHEDULES
from pail.protocol.schedules import registry
from tests.support.clocks import ServerClock
from tests.support.lambdas import FakeContext, LogCapture

NIGHTLY = registry.declaration("nightly", {"r": 1}, cron="0 2 * * *", timezone="Europe/Berlin")
HOURLY = registry.declaration("hourly", {"h": 1}, cron="@hourly")


def _reaper(queue: Pail, declared: list[dict[str, object]] | str) -> ReaperFunction:
    text = declared if isinstance(declared, str) else json.dumps(declared)
    return ReaperFunction(
        pail=queue, logger=LogCapture().logger, env={ENV_SCHEDULES: text}, invoke_worker=print
    )


def _queue() -> tuple[Pail, ServerClock]:
    server = ServerClock(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC))
    return Pail(MemoryStore("jobs", now=server), shards=1), server


def test_given_declared_schedules_when_the_reaper_first_runs_then_they_are_in_the_bucket_and_tick() -> (
    None
):
    queue, server = _queue()
    queue.schedule("made-at-run-time", {"api": True}, every=86_400)

    first = _reaper(queue, [NIGHTLY, HOURLY])({}, FakeContext())
    server.advance(3600)
    second = _reaper(queue, [NIGHTLY, HOURLY])({}, FakeContext())  # a cold container

    assert first["schedules_synced"] == {"written": ["hourly", "nightly"], "removed": []}
    assert second["schedules_synced"] == {"written": [], "removed": []}  # unchanged: no write
    # 01:00 UTC: the tick of hourly, and of nightly (02:00 in Berlin).
    assert second["schedules"]["enqueued"] == 2
    names = {i.name: i.schedule.source for i in queue.schedules()}
    assert names == {"hourly": "deploy", "nightly": "deploy", "made-at-run-time": "api"}


def test_given_a_deploy_that_drops_a_schedule_when_the_reaper_runs_then_only_that_one_goes() -> (
    None
):
    queue, _ = _queue()
    queue.schedule("made-at-run-time", {"api": True}, every=86_400)
    _reaper(queue, [NIGHTLY, HOURLY])({}, FakeContext())

    summary = _reaper(queue, [NIGHTLY])({}, FakeContext())
    emptied = _reaper(queue, [])({}, FakeContext())

    assert summary["schedules_synced"] == {"written": [], "removed": ["hourly"]}
    assert emptied["schedules_synced"] == {"written": [], "removed": ["nightly"]}
    assert [i.name for i in queue.schedules()] == ["made-at-run-time"]


def test_given_an_unreadable_declaration_when_the_reaper_runs_then_it_still_reaps() -> None:
    queue, _ = _queue()
    reaper = _reaper(queue, '[{"name": "x", "cron": "61 * * * *"}]')

    summary = reaper({}, FakeContext())
    again = reaper({}, FakeContext())

    assert summary["schedules_synced"] is None and again["schedules_synced"] is None
    assert summary["reap"]["complete_pass"] is True
    assert queue.schedules() == []
