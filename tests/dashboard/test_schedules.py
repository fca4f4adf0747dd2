"""The dashboard's schedules page: next run, last job and its state, Pause and Resume, foreign bytes.

A real ``DashboardServer`` on 127.0.0.1 over the real local S3 server, read
and driven with ``http.client`` as in ``test_access``: the session, the CSRF
token and the confirmation pages are the ones a browser gets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from html import unescape
from urllib.parse import urlencode

import pytest

from pail import Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.access import Access
from pail.local import LocalS3
from pail.protocol.schedules import Schedule, Timing, registry
from pail.protocol.schedules.definition import MAX_BYTES
from tests.dashboard.test_access import FakeClock, open_session, request

pytestmark = pytest.mark.s3

HOSTILE_NAME = "<img src=x onerror=alert(1)>"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pail(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]


@pytest.fixture
def server(pail: Pail, clock: FakeClock) -> Iterator[DashboardServer]:
    board = Dashboard(pail.store, interval=10.0, clock=clock)
    with DashboardServer(board, access=Access(clock=clock)) as running:
        yield running


def _due_schedule(pail: Pail, name: str) -> None:
    """A schedule made two hours ago: its latest tick is due at the next reaper pass."""
    created = pail.store.list(pail.keys.schedules(), max_keys=1).server_time - timedelta(hours=2)
    registry.put(
        pail.store,
        pail.keys,
        Schedule(name, {"report": name}, Timing.of(every=3600), created),
    )


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[:2000]
    return found.group(1)


def _row(page: str, name: str) -> str:
    found = re.search(rf"<tr><th scope=\"row\"><code>{re.escape(name)}</code>.*?</tr>", page)
    assert found is not None, f"no row for {name} in {page[:3000]}"
    return found.group(0)


def test_given_schedules_and_foreign_definitions_then_the_page_lists_each_with_its_next_run_and_last_job(
    server: DashboardServer, pail: Pail, clock: FakeClock
) -> None:
    pail.schedule("nightly", {"r": 1}, cron="0 2 * * *", timezone="Europe/Berlin")
    _due_schedule(pail, "hourly")
    pail.schedule("held", {"r": 2}, every=60)
    pail.pause_schedule("held")
    pail.reap()  # hourly's due tick: its job, and the definition's last_job
    job_id = next(s.last_job for s in pail.schedules() if s.name == "hourly")
    assert job_id is not None
    prefix = pail.keys.schedules()
    pail.store.put(prefix + "garbage", b"{not json \xff")
    pail.store.put(prefix + "huge", b"x" * (MAX_BYTES + 1))
    pail.store.put(prefix + HOSTILE_NAME, b"{}")
    cookie = open_session(server)

    status, _, page = request(server, "GET", "/q/_/schedules", cookie=cookie)

    assert status == 200
    nightly, hourly, held = _row(page, "nightly"), _row(page, "hourly"), _row(page, "held")
    assert "cron 0 2 * * * (Europe/Berlin)" in nightly and "UTC" in nightly
    assert f"/q/_/job/{job_id}" in hourly and "state-pending" in hourly
    assert "every 3600 s" in hourly and "none yet" in nightly
    assert "paused" in held and "/q/_/schedules/held/resume" in held
    assert "/q/_/schedules/nightly/pause" in nightly
    # Foreign definitions are rows that say what they are; markup is text.
    assert "not read" in page and "unreadable" in page and "not a schedule name" in page
    assert HOSTILE_NAME not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count('class="unreadable"') == 3

    # The job ends: the page says so at its next refresh, and no longer reads it after.
    message = pail.claim()
    assert message is not None and message.id == job_id
    message.complete({"ok": True})
    clock.now += 11
    fresh = request(server, "GET", "/q/_/schedules", cookie=cookie)[2]
    assert "state-done" in _row(fresh, "hourly")


def test_given_the_queue_page_then_it_links_the_schedules_page(
    server: DashboardServer,
) -> None:
    cookie = open_session(server)

    _, _, page = request(server, "GET", "/q/_", cookie=cookie)

    assert 'href="/q/_/schedules" id="schedules-link"' in page


def test_given_a_schedule_when_paused_and_resumed_through_the_confirmation_forms_then_the_bucket_says_so(
    server: DashboardServer, pail: Pail
) -> None:
    pail.schedule("nightly", {"r": 1}, cron="@daily")
    cookie = open_session(server)

    status, _, confirm = request(server, "GET", "/q/_/schedules/nightly/pause", cookie=cookie)
    assert status == 200 and 'action="/q/_/schedules/nightly/pause"' in confirm
    status, headers, _ = request(
        server,
        "POST",
        "/q/_/schedules/nightly/pause",
        cookie=cookie,
        body=urlencode({"csrf": _csrf(confirm)}),
    )
    assert status == 303 and "notice=schedule-paused" in headers["location"]
    assert [s.schedule.paused for s in pail.schedules()] == [True]
    after = request(server, "GET", unescape(headers["location"]), cookie=cookie)[2]
    assert "Schedule nightly is paused" in after and "/q/_/schedules/nightly/resume" in after

    again = request(
        server,
        "POST",
        "/q/_/schedules/nightly/pause",
        cookie=cookie,
        body=urlencode({"csrf": _csrf(confirm)}),
    )
    assert "notice=schedule-unchanged" in again[1]["location"]

    _, _, confirm = request(server, "GET", "/q/_/schedules/nightly/resume", cookie=cookie)
    status, headers, _ = request(
        server,
        "POST",
        "/q/_/schedules/nightly/resume",
        cookie=cookie,
        body=urlencode({"csrf": _csrf(confirm)}),
    )
    assert status == 303 and "notice=schedule-resumed" in headers["location"]
    assert [s.schedule.paused for s in pail.schedules()] == [False]


def test_given_a_pause_without_the_session_token_or_from_another_origin_then_refused_and_unchanged(
    server: DashboardServer, pail: Pail
) -> None:
    pail.schedule("nightly", {"r": 1}, cron="@daily")
    cookie = open_session(server)
    _, _, confirm = request(server, "GET", "/q/_/schedules/nightly/pause", cookie=cookie)

    no_token = request(server, "POST", "/q/_/schedules/nightly/pause", cookie=cookie, body="x=1")
    other_origin = request(
        server,
        "POST",
        "/q/_/schedules/nightly/pause",
        cookie=cookie,
        body=urlencode({"csrf": _csrf(confirm)}),
        headers={"Origin": f"http://127.0.0.1:{server.port}"},
    )
    no_session = request(
        server,
        "POST",
        "/q/_/schedules/nightly/pause",
        body=urlencode({"csrf": _csrf(confirm)}),
    )
    by_get = request(server, "GET", "/q/_/schedules/nightly/pause", cookie=cookie)

    assert [no_token[0], other_origin[0], no_session[0]] == [403, 403, 403]
    assert by_get[0] == 200  # a GET only asks
    assert [s.schedule.paused for s in pail.schedules()] == [False]


def test_given_a_foreign_definition_or_an_odd_name_when_paused_then_the_page_says_so(
    server: DashboardServer, pail: Pail
) -> None:
    pail.store.put(pail.keys.schedule("garbage"), b"\x00\xff not a schedule")
    cookie = open_session(server)
    _, _, confirm = request(server, "GET", "/q/_/schedules/garbage/pause", cookie=cookie)
    token = urlencode({"csrf": _csrf(confirm)})

    unreadable = request(server, "POST", "/q/_/schedules/garbage/pause", cookie=cookie, body=token)
    gone = request(server, "POST", "/q/_/schedules/missing/pause", cookie=cookie, body=token)
    odd = request(server, "GET", "/q/_/schedules/%3Cb%3E/pause", cookie=cookie)

    assert "notice=schedule-unreadable" in unreadable[1]["location"]
    assert "notice=schedule-gone" in gone[1]["location"]
    assert odd[0] == 404 and "<b>" not in odd[2]
    assert pail.store.get(pail.keys.schedule("garbage")).body == b"\x00\xff not a schedule"  # type: ignore[union-attr]


def test_given_an_idle_page_when_refreshed_within_the_interval_then_it_sends_no_request(
    server: DashboardServer, pail: Pail, clock: FakeClock
) -> None:
    _due_schedule(pail, "hourly")
    pail.reap()
    cookie = open_session(server)
    request(server, "GET", "/q/_/schedules", cookie=cookie)
    board = server.board
    before = board.meter.total

    request(server, "GET", "/q/_/schedules", cookie=cookie)
    cached = board.meter.total - before
    clock.now += 11
    request(server, "GET", "/q/_/schedules", cookie=cookie)
    refreshed = board.meter.total - before

    assert cached == 0
    # A refresh: one LIST, one GET per definition, and the pending last job's state again.
    print(f"\nschedules page refresh: {refreshed} requests")
    assert 2 <= refreshed <= 8, refreshed
