"""Schedules on the real local S3 server: the CLI, the reaper's pass, and what a tick and an idle hour cost."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from pail import Pail
from pail.keys import QUEUE
from pail.protocol.schedules import Ticker
from tests.support.command import Invoke
from tests.support.counting import RequestCounter
from tests.support.waiting import wait_until


def test_given_cli_when_add_list_reap_remove_then_the_schedule_round_trips(
    invoke: Invoke, bucket: str, pail: Pail
) -> None:
    added = invoke("schedule", "add", bucket, "tick", '{"t": 1}', "--every", "1", "--json")
    listed = invoke("schedule", "list", bucket, "--json")
    human = invoke("schedule", "list", bucket)

    assert added.exit_code == 0, added.stderr
    assert json.loads(added.stdout)["every"] == 1
    [row] = json.loads(listed.stdout)
    assert row["name"] == "tick" and row["payload"] == {"t": 1} and row["last_job"] is None
    assert "tick" in human.stdout and "every 1 s" in human.stdout

    def reaped_a_tick() -> bool:
        return "scheduled " in invoke("reap", bucket).stdout

    wait_until(reaped_a_tick, 30, what="a reap pass enqueued the schedule's tick")
    [after] = json.loads(invoke("schedule", "list", bucket, "--json").stdout)
    assert after["last_job"] is not None and pail.status(after["last_job"]) is not None

    paused = invoke("schedule", "pause", bucket, "tick")
    listed_paused = invoke("schedule", "list", bucket)
    resumed = invoke("schedule", "resume", bucket, "tick", "--json")
    missing = invoke("schedule", "pause", bucket, "nothing")
    assert paused.exit_code == 0 and "tick: paused" in paused.stdout
    assert "paused" in listed_paused.stdout
    assert json.loads(resumed.stdout)["paused"] is False and missing.exit_code == 3

    removed = invoke("schedule", "remove", bucket, "tick")
    again = invoke("schedule", "remove", bucket, "tick")
    assert removed.exit_code == 0 and again.exit_code == 3
    assert json.loads(invoke("schedule", "list", bucket, "--json").stdout) == []


def test_given_bad_cron_or_name_when_added_then_exit_2_with_the_reason(
    invoke: Invoke, bucket: str
) -> None:
    bad_cron = invoke("schedule", "add", bucket, "n", "{}", "--cron", "61 * * * *")
    bad_alias = invoke("schedule", "add", bucket, "n", "{}", "--cron", "@reboot")
    bad_name = invoke("schedule", "add", bucket, "a/b", "{}", "--every", "60")
    bad_zone = invoke("schedule", "add", bucket, "n", "{}", "--cron", "@daily", "--timezone", "X/Y")
    neither = invoke("schedule", "add", bucket, "n", "{}")

    for result, reason in [
        (bad_cron, "invalid cron expression"),
        (bad_alias, "unknown cron alias"),
        (bad_name, "invalid schedule name"),
        (bad_zone, "unknown timezone"),
        (neither, "exactly one of"),
    ]:
        assert result.exit_code == 2, result.stdout
        assert reason in result.stderr
    assert json.loads(invoke("schedule", "list", bucket, "--json").stdout) == []


def test_given_ten_schedules_when_idle_then_one_list_per_pass_and_a_tick_costs_a_list_and_3_puts(
    connect: Callable[..., Pail], counter: RequestCounter
) -> None:
    pail = connect(shards=1)
    for n in range(10):
        pail.schedule(f"daily-{n}", {"n": n}, cron="@daily")
    ticker = Ticker(pail.store, pail.keys)
    cold = counter.total()
    ticker.tick()
    cold_start = counter.total() - cold

    before = counter.total()
    for _ in range(10):
        assert ticker.tick().enqueued == 0
    idle = dict(counter.by_operation)
    idle_requests = counter.total() - before

    pail.schedule("every-second", {"s": 1}, every=1)
    ticker.tick()  # reads the new definition
    per_tick: list[int] = []

    def one_tick_enqueued() -> bool:
        start = counter.total()
        report = ticker.tick()
        if report.enqueued:
            per_tick.append(counter.total() - start)
        return bool(per_tick)

    wait_until(one_tick_enqueued, 30, what="the every-second schedule ticked")

    assert cold_start == 11  # 1 LIST + 1 GET per definition, once per process
    assert idle_requests == 10 and idle["ListObjectsV2"] == 11  # a LIST a pass, nothing else
    # The pass that enqueued: LIST, PUT key record, PUT job, PUT definition.
    assert per_tick == [4]
    assert pail.stats().pending >= 1


def test_given_two_reapers_at_once_when_a_tick_is_due_then_one_job(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(shards=1)
    reapers = [connect(shards=1) for _ in range(4)]
    info = pail.schedule("every-second", {"s": 1}, every=1)
    for reaper in reapers:
        reaper.reap()  # each has read the definition

    def first_tick_due() -> bool:  # by the server's clock, which the reapers judge by
        return pail.store.list(pail.keys.schedules()).server_time >= info.next_due

    wait_until(first_tick_due, 30, what="the server's clock passed the first tick")
    start = threading.Barrier(len(reapers))
    errors: list[BaseException] = []

    def race(reaper: Pail) -> None:
        try:
            start.wait(10)
            for _ in range(5):
                reaper.reap()
        except BaseException as exc:  # noqa: BLE001 - reported below: a thread failing fails the test
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(r,)) for r in reapers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert not errors and not any(t.is_alive() for t in threads)
    records = pail.store.list(pail.keys.root + "keys/").items
    named = [json.loads(pail.store.get(r.key).body)["id"] for r in records]  # type: ignore[union-attr]
    jobs = [
        pail.keys.entry_id(i.key, QUEUE) for i in pail.store.list(pail.keys.prefix(QUEUE)).items
    ]
    # Every job is the one its tick's key record names: a second job for a tick has no record.
    assert jobs and set(jobs) <= set(named) and len(set(named)) == len(named) == len(records)


def test_given_a_tagged_schedule_when_it_ticks_then_its_job_carries_the_tags_and_is_found_by_them(
    pail: Pail,
) -> None:
    pail.schedule("every-second", {"s": 1}, every=1, tags={"kind": "nightly-report"})
    (listed,) = pail.schedules()
    ticker = Ticker(pail.store, pail.keys)

    wait_until(lambda: ticker.tick().enqueued > 0, 30, what="the every-second schedule ticked")

    (found,) = pail.search(tags={"kind": "nightly-report"}).jobs
    assert found.tags == {"kind": "nightly-report"} and found.state.value == "pending"
    assert listed.name == "every-second"
