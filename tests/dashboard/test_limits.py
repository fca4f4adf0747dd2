"""The queue page's limit forms: set, remove, per group, rates, bad input, CSRF.

A real ``DashboardServer`` on 127.0.0.1 over the real local S3 server,
driven with ``http.client`` as in ``test_access``: each change is a POST
with the session's CSRF token that answers a confirmation page, whose own
POST (``confirm=yes``) makes the change and redirects to a notice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from urllib.parse import urlencode

import pytest

from pail import Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.access import Access
from pail.local import LocalS3
from pail.protocol.limits import Limits
from pail.protocol.limits.rate import Rate, RateLimits
from tests.dashboard.test_access import FakeClock, open_session, request

pytestmark = pytest.mark.s3


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


@pytest.fixture
def cookie(server: DashboardServer) -> str:
    return open_session(server)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[:2000]
    return found.group(1)


def _notice(page: str) -> str:
    found = re.search(r'<div class="notice" role="status" id="notice">(.*?)</div>', page)
    assert found is not None, page[:3000]
    return unescape(found.group(1))


def _limits_line(page: str) -> str:
    found = re.search(r'<section data-live id="queue-limits".*?</section>', page)
    assert found is not None
    return unescape(re.sub(r"<[^>]+>", "", found.group(0)))


def _ask(server: DashboardServer, cookie: str, **fields: str) -> tuple[int, dict[str, str], str]:
    """The queue page's form sent as a browser sends it (the session's token, no confirm)."""
    token = _csrf(request(server, "GET", "/q/_", cookie=cookie)[2])
    return request(
        server, "POST", "/q/_/limits", cookie=cookie, body=urlencode({"csrf": token, **fields})
    )


def _change(server: DashboardServer, cookie: str, **fields: str) -> str:
    """Ask, confirm on the confirmation page, follow the redirect: the notice shown."""
    status, _, confirm = _ask(server, cookie, **fields)
    assert status == 200 and 'id="confirm"' in confirm, confirm[:2000]
    sent = dict(re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)">', confirm))
    assert sent["confirm"] == "yes"
    status, headers, _ = request(server, "POST", "/q/_/limits", cookie=cookie, body=urlencode(sent))
    assert status == 303, status
    page = request(server, "GET", headers["location"], cookie=cookie)[2]
    return f"{_notice(page)} | {_limits_line(page)}"


def test_given_the_queue_page_then_it_has_the_limit_forms_with_the_session_token(
    server: DashboardServer, cookie: str
) -> None:
    _, _, page = request(server, "GET", "/q/_", cookie=cookie)

    for form in ("concurrency-form", "rate-form"):
        found = re.search(rf'<form method="post" action="/q/_/limits" id="{form}".*?</form>', page)
        assert found is not None and 'name="csrf"' in found.group(0)
    assert 'id="clear-limits"' in page
    # The forms sit outside the live region: a refresh never replaces what is typed.
    assert "concurrency-form" not in re.search(r'id="queue-limits".*?</section>', page).group(0)  # type: ignore[union-attr]


def test_given_a_concurrency_when_confirmed_then_set_and_an_empty_value_removes_it(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    status, _, confirm = _ask(server, cookie, kind="concurrency", value=" 5 ")
    assert status == 200 and "Let at most 5 job(s) of (default) run at once?" in unescape(confirm)
    assert pail.limits() == Limits()  # asking changed nothing

    shown = _change(server, cookie, kind="concurrency", value="5")

    assert pail.limits().concurrency == 5
    assert "Concurrency limit set: the queue runs at most 5 job(s) at once" in shown
    assert "queue: at most 5 running at once" in shown

    shown = _change(server, cookie, kind="concurrency", value="")

    assert pail.limits().concurrency is None
    assert "The concurrency limit of the queue was removed" in shown and "no limits" in shown
    _change(server, cookie, kind="concurrency", value="3")
    _change(server, cookie, kind="concurrency", value="NONE")
    assert pail.limits().concurrency is None


def test_given_a_group_when_confirmed_then_its_own_or_every_groups_limit_is_set(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    pail.set_limit(8)

    every = _change(server, cookie, kind="concurrency", value="2", group="*")
    own = _change(server, cookie, kind="concurrency", value="10", group="tenant-42")

    assert pail.limits() == Limits(concurrency=8, group_concurrency=2, groups={"tenant-42": 10})
    assert "every group runs at most 2" in every and "each group: at most 2 running" in every
    assert "group tenant-42 runs at most 10" in own
    assert "group tenant-42: at most 10 running at once" in own

    _change(server, cookie, kind="concurrency", value="none", group="tenant-42")
    assert pail.limits().groups == {}


def test_given_a_rate_when_confirmed_then_set_beside_the_concurrency_and_removed(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    pail.set_limit(4)

    shown = _change(server, cookie, kind="rate", value="10/s")
    _change(server, cookie, kind="rate", value="5/2s", group="*")

    assert pail.rate_limits() == RateLimits(queue=Rate(10, 1), group=Rate(5, 2))
    assert pail.limits().concurrency == 4  # the concurrency limit is kept
    assert "Rate limit set: the queue starts at most 10/s job(s)" in shown
    assert "queue: at most 10/s starts" in shown

    shown = _change(server, cookie, kind="rate", value="")

    assert pail.rate_limits() == RateLimits(group=Rate(5, 2))
    assert "The rate limit of the queue was removed" in shown


def test_given_limits_when_every_limit_is_removed_then_none_is_left_and_again_says_so(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    pail.set_limit(3)
    pail.set_rate("1/s", group="*")

    shown = _change(server, cookie, kind="clear")

    assert pail.limits() == Limits() and pail.rate_limits() == RateLimits()
    assert "Every limit of the queue was removed" in shown
    assert "The queue had no limits" in _change(server, cookie, kind="clear")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"kind": "concurrency", "value": "0"}, "a limit of 0 would stop every claim"),
        ({"kind": "concurrency", "value": "-1"}, "a whole number from 1 to 1000"),
        ({"kind": "concurrency", "value": "abc"}, "a whole number from 1 to 1000"),
        ({"kind": "concurrency", "value": "1001"}, "a whole number from 1 to 1000"),
        ({"kind": "concurrency", "value": "2.5"}, "a whole number from 1 to 1000"),
        # An Arabic-Indic three: str.isdigit() says yes, the form says no.
        ({"kind": "concurrency", "value": "٣"}, "a whole number from 1 to 1000"),
        ({"kind": "concurrency", "value": "7" * 10_000}, "at most 100 characters"),
        ({"kind": "rate", "value": "5/0s"}, "a rate is COUNT/PERIOD"),
        ({"kind": "rate", "value": "0/s"}, "a rate is COUNT/PERIOD"),
        ({"kind": "rate", "value": "10/fortnight"}, "a rate is COUNT/PERIOD"),
        ({"kind": "rate", "value": "x" * 10_000}, "at most 100 characters"),
        ({"kind": "concurrency", "value": "2", "group": "a~b"}, "the group is empty"),
        ({"kind": "rate", "value": "1/s", "group": "<b>x</b>"}, "the group is empty"),
        ({"kind": "drop-table", "value": "1"}, "the form named no limit"),
        ({"value": "1"}, "the form named no limit"),
    ],
)
def test_given_bad_input_when_sent_or_confirmed_then_a_notice_says_why_and_nothing_changes(
    server: DashboardServer, cookie: str, pail: Pail, fields: dict[str, str], says: str
) -> None:
    pail.set_limit(7)
    before = pail.store.get(pail.keys.limits())
    assert before is not None

    asked = _ask(server, cookie, **fields)
    token = _csrf(request(server, "GET", "/q/_", cookie=cookie)[2])
    confirmed = request(
        server,
        "POST",
        "/q/_/limits",
        cookie=cookie,
        body=urlencode({"csrf": token, "confirm": "yes", **fields}),
    )

    for status, headers, _ in (asked, confirmed):
        assert status == 303
        page = request(server, "GET", headers["location"], cookie=cookie)[2]
        assert "Nothing changed" in _notice(page) and says in _notice(page)
        assert "<b>" not in _notice(page)
    after = pail.store.get(pail.keys.limits())
    assert after is not None and after.etag == before.etag


def test_given_a_limit_form_without_the_session_token_or_from_another_origin_then_refused_and_unchanged(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    token = _csrf(request(server, "GET", "/q/_", cookie=cookie)[2])
    change = {"kind": "concurrency", "value": "1", "confirm": "yes"}

    no_token = request(server, "POST", "/q/_/limits", cookie=cookie, body=urlencode(change))
    stale = request(
        server, "POST", "/q/_/limits", cookie=cookie, body=urlencode({**change, "csrf": "00" * 16})
    )
    other_origin = request(
        server,
        "POST",
        "/q/_/limits",
        cookie=cookie,
        body=urlencode({**change, "csrf": token}),
        headers={"Origin": f"http://127.0.0.1:{server.port}"},
    )
    no_session = request(server, "POST", "/q/_/limits", body=urlencode({**change, "csrf": token}))
    by_get = request(server, "GET", "/q/_/limits?" + urlencode(change), cookie=cookie)

    assert [no_token[0], stale[0], other_origin[0], no_session[0]] == [403, 403, 403, 403]
    assert by_get[0] == 404  # no GET changes anything, nor asks
    assert pail.store.get(pail.keys.limits()) is None


def test_given_unreadable_limits_when_a_limit_is_set_then_they_are_replaced(
    server: DashboardServer, cookie: str, pail: Pail
) -> None:
    pail.store.put(pail.keys.limits(), b"<script>alert(1)</script>\xff")
    page = request(server, "GET", "/q/_", cookie=cookie)[2]
    assert "unreadable" in _limits_line(page) and "<script>alert" not in page

    shown = _change(server, cookie, kind="concurrency", value="6")

    assert pail.limits() == Limits(concurrency=6)
    assert "unreadable" not in shown.split(" | ")[1]
