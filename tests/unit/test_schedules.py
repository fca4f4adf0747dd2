"""Schedules on the in-memory store: the dialect, the ticks, one job per tick, catch-up, foreign bytes, cost."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pail import ConfigurationError, Pail
from pail.ids import new_token
from pail.protocol.schedules import Ticker, Timing, registry, tick_key
from pail.protocol.schedules.definition import Schedule
from tests.support.clocks import ServerClock
from tests.support.recording_store import RecordingStore

T0 = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)


class _Clock:
    """The producer's clock, read from the server clock (so ``created`` is the test's time)."""

    def __init__(self, server: ServerClock) -> None:
        self._server = server

    def now(self) -> datetime:
        return self._server()

    def monotonic(self) -> float:
        return (self._server() - T0).total_seconds()

    def sleep(self, seconds: float, wake: threading.Event | None = None) -> None:
        """Time moves only when the test moves it."""


def _queue() -> tuple[Pail, RecordingStore, ServerClock]:
    server = ServerClock(T0)
    store = RecordingStore(now=server)
    return Pail(store, clock=_Clock(server), shards=1), store, server


def _pending_payloads(pail: Pail) -> list[object]:
    payloads = []
    while (message := pail.claim()) is not None:
        payloads.append(message.payload)
        message.complete({})
    return payloads


# -- the dialect --------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "now", "expected"),
    [
        ("0 2 * * *", "2026-01-03T05:00:00", ["2026-01-02T02:00:00", "2026-01-03T02:00:00"]),
        ("*/15 * * * *", "2026-01-01T10:31:00", ["2026-01-01T10:15:00", "2026-01-01T10:30:00"]),
        ("0 9-17/4 * * *", "2026-01-01T18:00:00", ["2026-01-01T13:00:00", "2026-01-01T17:00:00"]),
        ("0 0 * * mon,fri", "2026-01-10T00:00:00", ["2026-01-05T00:00:00", "2026-01-09T00:00:00"]),
        ("@hourly", "2026-01-01T10:00:00", ["2026-01-01T09:00:00", "2026-01-01T10:00:00"]),
        ("@weekly", "2026-01-12T00:00:00", ["2026-01-04T00:00:00", "2026-01-11T00:00:00"]),
        ("@monthly", "2026-03-01T00:00:00", ["2026-02-01T00:00:00", "2026-03-01T00:00:00"]),
        ("@yearly", "2027-06-01T00:00:00", ["2026-01-01T00:00:00", "2027-01-01T00:00:00"]),
    ],
)
def test_given_cron_when_latest_two_ticks_then_the_fields_ranges_lists_steps_and_aliases_hold(
    cron: str, now: str, expected: list[str]
) -> None:
    ticks = Timing.of(cron=cron).latest(datetime.fromisoformat(now).replace(tzinfo=UTC), limit=2)

    assert [t.replace(tzinfo=None).isoformat() for t in ticks] == expected


def test_given_time_zone_when_ticks_computed_then_local_time_across_daylight_saving() -> None:
    timing = Timing.of(cron="0 2 * * *", timezone="Europe/Berlin")
    # 2026-03-29: Berlin skips 02:00-03:00; Debian cron (and cronsim) runs that job at 03:00 CEST.
    ticks = timing.latest(datetime(2026, 3, 30, 12, tzinfo=UTC), limit=3)

    assert [t.isoformat() for t in ticks] == [
        "2026-03-28T01:00:00+00:00",  # 02:00 CET
        "2026-03-29T01:00:00+00:00",  # 03:00 CEST, the skipped hour's job
        "2026-03-30T00:00:00+00:00",  # 02:00 CEST
    ]


def test_given_interval_when_ticks_computed_then_multiples_since_the_epoch() -> None:
    timing = Timing.of(every=timedelta(minutes=30))
    now = datetime(2026, 1, 1, 10, 45, 12, tzinfo=UTC)

    assert [t.isoformat() for t in timing.latest(now, limit=2)] == [
        "2026-01-01T10:00:00+00:00",
        "2026-01-01T10:30:00+00:00",
    ]
    assert timing.next_after(now).isoformat() == "2026-01-01T11:00:00+00:00"
    assert timing.latest(now, after=datetime(2026, 1, 1, 10, 30, tzinfo=UTC), limit=5) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * * *"}, "must have 5 fields"),
        ({"cron": "0 0 0 * * *"}, "must have 5 fields"),
        ({"cron": "@reboot"}, "unknown cron alias"),
        ({"cron": "*/0 * * * *"}, "invalid cron expression"),
        ({"cron": "0 0 30 2 *"}, "invalid cron expression"),
        ({"cron": ""}, "cron must be"),
        ({"cron": "0 2 * * *", "every": 60}, "exactly one of"),
        ({}, "exactly one of"),
        ({"every": 0}, "every must be"),
        ({"every": 1.5}, "every must be"),
        ({"every": True}, "every must be"),
        ({"every": float("nan")}, "every must be"),
        ({"cron": "@daily", "timezone": "Mars/Olympus"}, "unknown timezone"),
        ({"cron": "@daily", "timezone": "../../etc/passwd"}, "unknown timezone"),
    ],
)
def test_given_bad_timing_when_scheduled_then_configuration_error_and_nothing_written(
    kwargs: dict[str, object], message: str
) -> None:
    pail, store, _ = _queue()

    with pytest.raises(ConfigurationError, match=message):
        pail.schedule("nightly", {"n": 1}, **kwargs)  # type: ignore[arg-type]

    assert store.list("").items == ()


@pytest.mark.parametrize("name", ["", "-x", "a/b", "a b", "x" * 101, "é", ".hidden"])
def test_given_bad_name_when_scheduled_then_configuration_error(name: str) -> None:
    pail, _, _ = _queue()

    with pytest.raises(ConfigurationError, match="invalid schedule name"):
        pail.schedule(name, {}, every=60)


def test_given_bad_payload_or_catch_up_when_scheduled_then_refused() -> None:
    pail, _, _ = _queue()

    with pytest.raises(ConfigurationError, match="catch_up"):
        pail.schedule("x", {}, every=60, catch_up=0)
    with pytest.raises(TypeError, match="payload"):
        pail.schedule("x", {"bad": float("nan")}, every=60)
    with pytest.raises(TypeError, match="more than 262144"):
        pail.schedule("x", {"blob": "x" * 300_000}, every=60)


# -- one job per tick ---------------------------------------------------------


def test_given_schedule_when_reaped_each_minute_then_one_job_per_tick_and_listed() -> None:
    pail, _, server = _queue()
    pail.schedule("quarter", {"report": "q"}, cron="*/15 * * * *")

    for _ in range(46):  # 00:00:30 .. 00:45:30: ticks at 00:15, 00:30, 00:45
        pail.reap()
        server.advance(60)

    assert _pending_payloads(pail) == [{"report": "q"}] * 3
    [info] = pail.schedules()
    assert info.schedule.last_tick == datetime(2026, 1, 1, 0, 45, tzinfo=UTC)
    assert info.last_job is not None and pail.status(info.last_job) is not None
    assert info.next_due == datetime(2026, 1, 1, 1, 0, tzinfo=UTC)


def test_given_two_schedulers_and_retries_when_same_tick_then_one_job() -> None:
    pail, store, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    server.advance(3600)  # 01:00:30: the 01:00 tick is due
    tickers = [Ticker(store, pail.keys) for _ in range(3)]

    reports = [t.tick() for t in tickers] + [Ticker(store, pail.keys).tick()]

    assert sum(r.enqueued for r in reports) == 1
    assert sum(r.existing for r in reports) == 0  # the others read last_tick: nothing due
    assert _pending_payloads(pail) == [{"h": 1}]


def test_given_stale_definitions_when_two_schedulers_race_then_one_job_per_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pail, store, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    first, second = Ticker(store, pail.keys), Ticker(store, pail.keys)
    first.tick(), second.tick()  # both know the definition; nothing is due
    server.advance(3600)
    original = Ticker._run
    raced: list[bool] = []

    def before_the_other_writes(self: Ticker, *args: Any) -> None:
        if self is first and not raced:  # second runs the whole tick after first listed
            raced.append(True)
            second.tick()
        original(self, *args)

    monkeypatch.setattr(Ticker, "_run", before_the_other_writes)
    report = first.tick()

    assert raced and report.existing == 1 and report.enqueued == 0
    assert _pending_payloads(pail) == [{"h": 1}]


def test_given_crash_between_key_record_and_job_when_next_pass_then_the_tick_job_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pail, store, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    server.advance(3600)
    put = store.put

    def crash_on_the_entry(key: str, body: bytes, **kwargs: Any) -> Any:
        if key.startswith("queue/"):
            raise RuntimeError("crashed before the job's entry")
        return put(key, body, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(store, "put", crash_on_the_entry)
        with pytest.raises(RuntimeError):
            Ticker(store, pail.keys).tick()

    report = Ticker(store, pail.keys).tick()

    assert (report.enqueued, report.existing) == (0, 1)  # the key record's job, written now
    assert _pending_payloads(pail) == [{"h": 1}]
    assert pail.schedules()[0].last_job is not None


def test_given_missed_ticks_when_default_then_only_the_latest() -> None:
    pail, _, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    server.advance(5 * 3600)  # 05:00:30: ticks 01:00 .. 05:00 missed

    report = pail.reap().schedules

    assert report is not None and report.enqueued == 1
    assert pail.schedules()[0].schedule.last_tick == datetime(2026, 1, 1, 5, tzinfo=UTC)
    assert len(_pending_payloads(pail)) == 1


def test_given_missed_ticks_when_catch_up_n_then_the_latest_n_oldest_first() -> None:
    pail, store, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly", catch_up=3)
    server.advance(5 * 3600)

    report = pail.reap().schedules
    pail.reap()

    assert report is not None and report.enqueued == 3
    records = store.list("keys/").items
    assert len(records) == 3
    assert len(_pending_payloads(pail)) == 3


def test_given_schedule_made_after_a_tick_when_reaped_then_that_tick_is_not_due() -> None:
    pail, _, server = _queue()
    server.advance(3600)  # 01:00:30: made after the 01:00 tick
    pail.schedule("hourly", {"h": 1}, cron="@hourly")

    report = pail.reap().schedules

    assert report is not None and report.enqueued == 0


def test_given_replaced_schedule_when_unchanged_then_history_kept_and_changed_then_new_payload() -> (
    None
):
    pail, _, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    server.advance(3600)
    pail.reap()
    first = pail.schedules()[0]

    again = pail.schedule("hourly", {"h": 1}, cron="@hourly")
    changed = pail.schedule("hourly", {"h": 2}, cron="@hourly")
    server.advance(3600)
    pail.reap()

    assert again.schedule.created == first.schedule.created
    assert changed.schedule.last_job == first.last_job
    assert _pending_payloads(pail) == [{"h": 1}, {"h": 2}]


def test_given_unschedule_when_reaped_then_no_more_jobs() -> None:
    pail, _, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")

    assert pail.unschedule("hourly") is True
    assert pail.unschedule("hourly") is False
    server.advance(7200)
    report = pail.reap().schedules

    assert report is not None and report.schedules == 0
    assert pail.schedules() == []


# -- foreign bytes ------------------------------------------------------------


FOREIGN_DEFINITIONS = [
    b"",
    b"garbage",
    b"[]",
    b'{"v": 1, "name": "other", "payload": 1, "every": 60, "created": "2026-01-01T00:00:00+00:00"}',
    b'{"v": 1, "name": "bad", "payload": NaN, "every": 60, "created": "2026-01-01T00:00:00+00:00"}',
    b'{"v": 1, "name": "bad", "payload": 1, "cron": "61 * * * *", "created": "2026-01-01T00:00:00+00:00"}',
    b'{"v": 1, "name": "bad", "payload": 1, "every": 60, "created": "yesterday"}',
    b'{"v": 1, "name": "bad", "payload": 1, "every": 60, "timezone": 5, "cron": 3}',
    b"[" * 10_000,
    b" " * (256 * 1024 + 1),  # too big to read: passed by from the listing, no GET
]


@pytest.mark.parametrize("body", FOREIGN_DEFINITIONS)
def test_given_foreign_definition_when_reaped_then_skipped_logged_once_and_others_tick(
    body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    pail, store, server = _queue()
    pail.schedule("good", {"g": 1}, cron="@hourly")
    store.put(pail.keys.schedule("bad"), body)
    store.put(pail.keys.schedules() + "nested/key", b"{}")
    store.put(pail.keys.schedules(), b"")  # the console's folder
    server.advance(3600)
    ticker = Ticker(store, pail.keys)

    with caplog.at_level("WARNING", logger="pail"):
        report = ticker.tick()
        again = ticker.tick()

    assert (report.enqueued, report.skipped) == (1, 2)
    assert (again.read, again.skipped) == (0, 2)  # unreadable ones are not read again
    assert sum("passed by" in r.getMessage() for r in caplog.records) == 2
    assert [i.name for i in pail.schedules()] == ["good"]
    assert _pending_payloads(pail) == [{"g": 1}]


@pytest.mark.parametrize("body", FOREIGN_DEFINITIONS)
def test_given_foreign_definition_when_an_operator_page_lists_it_then_it_is_a_row_with_its_problem(
    body: bytes,
) -> None:
    pail, store, _ = _queue()
    pail.schedule("good", {"g": 1}, cron="@hourly")
    store.put(pail.keys.schedule("bad"), body)
    store.put(pail.keys.schedules() + "nested/key", b"{}")
    store.put(pail.keys.schedules(), b"")  # the console's folder

    page = registry.read_page(store, pail.keys, limit=2)
    rest = registry.read_page(store, pail.keys, after=page.next_after, limit=2)

    rows = [*page.entries, *rest.entries]
    assert [(r.name, r.info is None) for r in rows] == [
        ("bad", True),
        ("good", False),
        ("nested/key", True),
    ]
    assert all(r.problem for r in rows if r.info is None)
    assert (page.more, page.next_after, rest.more) == (True, "bad", False)  # the folder, then bad
    gets = [c for c in store.calls if c[0] == "get" and c[1].endswith("/bad")]
    assert len(gets) == (0 if len(body) > 256 * 1024 else 1)  # too big: never read


def test_given_definition_when_encoded_then_decodes_to_itself() -> None:
    schedule = Schedule(
        "n",
        {"a": [1, 2]},
        Timing.of(cron="0 2 * * *", timezone="Europe/Berlin"),
        T0,
        catch_up=4,
        last_tick=T0,
        last_job="01J0000000000000000000000A",
    )

    assert Schedule.decode(schedule.encode(new_token()), "n") == schedule


# -- cost ---------------------------------------------------------------------


def test_given_ten_schedules_when_idle_passes_then_one_list_each_and_a_tick_costs_three_puts() -> (
    None
):
    pail, store, server = _queue()
    for n in range(10):
        pail.schedule(f"s{n}", {"n": n}, cron="@daily")
    ticker = Ticker(store, pail.keys)
    ticker.tick()  # a cold start reads each definition once
    store.clear()

    for _ in range(60):
        server.advance(60)
        ticker.tick()

    assert store.operations() == {"list": 60}
    pail.schedule("minutely", {"m": 1}, every=60)
    ticker.tick()
    server.advance(60)
    store.clear()
    report = ticker.tick()
    assert report.enqueued == 1
    assert store.operations() == {"list": 1, "put": 3}
    assert tick_key("minutely", datetime(2026, 1, 1, 1, 3, tzinfo=UTC)).endswith("01:03:00Z")


def test_given_paused_schedule_when_reaped_then_no_job_and_resuming_skips_the_pause_s_ticks() -> (
    None
):
    pail, store, server = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly", catch_up=5)
    ticker = Ticker(store, pail.keys)

    paused = pail.pause_schedule("hourly")
    server.advance(3 * 3600)  # 03:00:30: ticks 01:00, 02:00, 03:00 fell while paused
    while_paused = ticker.tick()
    resumed = pail.pause_schedule("hourly", paused=False)
    again = pail.pause_schedule("hourly", paused=False)
    after_resume = ticker.tick()
    server.advance(3600)
    next_tick = ticker.tick()

    assert paused is not None and paused.schedule.paused
    assert while_paused.enqueued == 0 and after_resume.enqueued == 0
    assert resumed is not None and not resumed.schedule.paused and again == resumed
    assert next_tick.enqueued == 1  # 04:00 only
    assert pail.pause_schedule("nothing") is None
    assert pail.schedules()[0].to_json()["paused"] is False


def test_given_paused_schedule_when_replaced_then_it_stays_paused() -> None:
    pail, _, _ = _queue()
    pail.schedule("hourly", {"h": 1}, cron="@hourly")
    pail.pause_schedule("hourly")

    replaced = pail.schedule("hourly", {"h": 2}, cron="@hourly")

    assert replaced.schedule.paused and pail.schedules()[0].schedule.paused
