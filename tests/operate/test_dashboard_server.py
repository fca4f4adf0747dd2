"""The dashboard's HTTP server without a browser: access, CSRF, no GET side effects, hostile input.

A real server on 127.0.0.1 over a real local S3 server; requests are sent
with ``http.client`` so that headers (Host, Origin, Cookie) can be forged
the way an attacker's page or another local user could.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from urllib.parse import quote, urlencode, urlsplit

import pytest

from pail import JobState, Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.server import COOKIE
from pail.local import LocalS3
from tests.support.counting import RequestCounter
from tests.support.population import GARBAGE_ID, HTML_ID, Population, populate

pytestmark = pytest.mark.s3


class Client:
    """One browser-like session: follows the token link once, then sends its cookie."""

    def __init__(self, server: DashboardServer) -> None:
        parts = urlsplit(server.link())
        self.port = server.port
        self.host = server.host
        assert parts.port == self.port and f"{parts.hostname}:{parts.port}" == self.host
        self.cookie = ""
        status, headers, _ = self.request("GET", f"/?{parts.query}")
        assert status == 200
        self.cookie = headers["set-cookie"].split(";", 1)[0]
        assert self.cookie.startswith(f"{COOKIE}=")
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]

    def request(
        self,
        method: str,
        path: str,
        *,
        body: str = "",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": self.host}
        if self.cookie:
            sent["Cookie"] = self.cookie
        if body:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        sent.update(headers or {})
        try:
            connection.request(method, path, body=body.encode(), headers=sent)
            response = connection.getresponse()
            text = response.read().decode()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        finally:
            connection.close()

    def csrf(self, path: str) -> str:
        _, _, page = self.request("GET", path)
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert match, "the page has no form"
        return match.group(1)


@pytest.fixture
def populated(connect_pail: Pail) -> Population:
    return populate(connect_pail)


@pytest.fixture
def connect_pail(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]


@pytest.fixture
def server(connect_pail: Pail) -> Iterator[DashboardServer]:
    with DashboardServer(Dashboard(connect_pail.store, interval=1.0)) as running:
        yield running


def test_given_no_session_when_a_page_is_requested_then_403_and_nothing_read(
    server: DashboardServer, populated: Population
) -> None:
    status, _, body = _anonymous(server).request("GET", "/")

    assert status == 403
    assert "access token" in body
    assert server.board.meter.total == 0


def _anonymous(server: DashboardServer) -> Client:
    client = Client.__new__(Client)
    client.port = server.port
    client.host = server.host
    client.cookie = ""
    return client


def test_given_a_foreign_host_header_when_requested_then_refused(
    server: DashboardServer, populated: Population
) -> None:
    client = Client(server)

    status, _, _ = client.request("GET", "/", headers={"Host": "attacker.example:80"})

    assert status == 403


def test_given_every_page_when_rendered_then_hostile_bytes_are_escaped_and_csp_is_strict(
    server: DashboardServer, populated: Population
) -> None:
    client = Client(server)
    pages = [
        "/",
        "/q/_",
        "/q/_/dlq",
        *(
            f"/q/_/jobs?state={state}"
            for state in ("pending", "delayed", "running", "done", "dead", "cancelled")
        ),
        f"/q/_/dlq/{quote(HTML_ID, safe='')}",
        f"/q/_/dlq/{GARBAGE_ID}",
        f"/q/_/job/{populated.running}",
        f"/q/_/job/{quote(HTML_ID, safe='')}",
    ]
    for path in pages:
        status, headers, body = client.request("GET", path)
        assert status == 200, (path, body[:500])
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "<img src=x" not in body and "<script>alert" not in body, path
    _, _, letter = client.request("GET", f"/q/_/dlq/{GARBAGE_ID}")
    assert "Unreadable record" in letter and "&lt;b&gt;bold&lt;/b&gt;" in letter


def test_given_a_post_without_the_token_when_redrive_then_403_and_the_job_stays_dead(
    server: DashboardServer, populated: Population, connect_pail: Pail
) -> None:
    client = Client(server)
    path = f"/q/_/dlq/{populated.dead}/redrive"

    no_token = client.request("POST", path, body="")
    wrong = client.request("POST", path, body=urlencode({"csrf": "0" * 64}))
    other_session = Client(server).csrf("/q/_/dlq")
    stolen = client.request("POST", path, body=urlencode({"csrf": other_session}))
    cross_site = client.request(
        "POST",
        path,
        body=urlencode({"csrf": client.csrf("/q/_/dlq")}),
        headers={"Origin": "https://attacker.example"},
    )

    assert [r[0] for r in (no_token, wrong, stolen, cross_site)] == [403, 403, 403, 403]
    assert connect_pail.status(populated.dead).state is JobState.FAILED  # type: ignore[union-attr]


def test_given_gets_of_action_urls_when_requested_then_nothing_changes(
    server: DashboardServer, populated: Population, connect_pail: Pail
) -> None:
    client = Client(server)

    for path in (
        f"/q/_/dlq/{populated.dead}/redrive",
        f"/q/_/dlq/{populated.dead}/delete",
        "/q/_/redrive-all",
    ):
        status, _, _ = client.request("GET", path)
        assert status in (200, 404)  # a confirmation page, or nothing

    assert connect_pail.status(populated.dead).state is JobState.FAILED  # type: ignore[union-attr]
    assert connect_pail.store.head(connect_pail.keys.dlq(populated.dead)) is not None


def test_given_the_token_when_redrive_then_303_with_a_notice_and_the_job_is_pending(
    server: DashboardServer, populated: Population, connect_pail: Pail
) -> None:
    client = Client(server)
    token = client.csrf("/q/_/dlq")

    status, headers, _ = client.request(
        "POST", f"/q/_/dlq/{populated.dead}/redrive", body=urlencode({"csrf": token})
    )

    assert status == 303 and "notice=redriven" in headers["location"]
    assert connect_pail.status(populated.dead).state is JobState.PENDING  # type: ignore[union-attr]
    _, _, page = client.request("GET", headers["location"])
    assert "was sent back to the queue" in page


def test_given_a_stale_etag_when_delete_then_changed_and_nothing_deleted(
    server: DashboardServer, populated: Population, connect_pail: Pail
) -> None:
    client = Client(server)
    token = client.csrf(f"/q/_/dlq/{populated.dead}/delete")

    status, headers, _ = client.request(
        "POST",
        f"/q/_/dlq/{populated.dead}/delete",
        body=urlencode({"csrf": token, "etag": '"stale"'}),
    )

    assert status == 303 and "notice=changed" in headers["location"]
    assert connect_pail.store.head(connect_pail.keys.dlq(populated.dead)) is not None


def test_given_pages_viewed_when_reading_the_footer_then_it_counts_every_s3_request_sent(
    s3_server: LocalS3, bucket: str
) -> None:
    counter = RequestCounter()
    pail = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    populate(pail)
    counter.attach(pail.store.client)  # type: ignore[attr-defined]
    with DashboardServer(Dashboard(pail.store, interval=60.0)) as running:
        client = Client(running)
        for path in ("/", "/q/_", "/q/_/dlq", "/q/_/jobs?state=running"):
            client.request("GET", path)
        _, _, page = client.request("GET", "/q/_/jobs?state=done")
        shown = int(re.search(r'id="requests-per-minute">(\d+)<', page).group(1))  # type: ignore[union-attr]

    assert shown == counter.total() == running.board.meter.total


def test_given_an_idle_queue_when_refreshed_within_the_interval_then_no_request_is_sent(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    populate(pail)
    with DashboardServer(Dashboard(pail.store, interval=3600.0)) as running:
        client = Client(running)
        client.request("GET", "/q/_")
        before = running.board.meter.total
        for _ in range(5):
            client.request("GET", "/q/_")
            client.request("GET", "/")

    # The overview lists the queues once (cached 60 s); the queue's snapshot is cached.
    assert running.board.meter.total - before == 1


def test_given_more_jobs_than_a_page_when_the_queue_page_renders_then_the_count_says_lower_bound(
    connect_pail: Pail,
) -> None:
    connect_pail.enqueue_many([{"n": n} for n in range(3)])
    with DashboardServer(Dashboard(connect_pail.store, page_size=2)) as running:
        client = Client(running)
        _, _, page = client.request("GET", "/q/_")

    pending = re.search(r'aria-label="pending: ([^"]+)"', page)
    assert pending is not None and pending.group(1) == "≥2"


def test_given_the_token_when_pause_and_resume_then_the_marker_comes_and_goes(
    server: DashboardServer, connect_pail: Pail
) -> None:
    client = Client(server)
    confirm_page = client.request("GET", "/q/_/pause")
    no_token = client.request("POST", "/q/_/pause", body="")
    assert confirm_page[0] == 200 and no_token[0] == 403
    assert connect_pail.paused() is None  # neither the GET nor the refused POST paused it
    token = client.csrf("/q/_/pause")

    status, headers, _ = client.request(
        "POST", "/q/_/pause", body=urlencode({"csrf": token, "reason": "<b>deploy</b>"})
    )
    state = connect_pail.paused()
    _, _, page = client.request("GET", headers["location"])

    assert status == 303 and "notice=paused" in headers["location"]
    assert state is not None and state.reason == "<b>deploy</b>"
    assert "&lt;b&gt;deploy&lt;/b&gt;" in page and 'id="resume-queue"' in page
    _, _, overview = client.request("GET", "/")
    assert 'class="badge paused"' in overview

    status, headers, _ = client.request("POST", "/q/_/resume", body=urlencode({"csrf": token}))

    assert status == 303 and "notice=resumed" in headers["location"]
    assert connect_pail.paused() is None


def test_given_a_foreign_pause_marker_when_the_queue_page_renders_then_paused_without_details(
    server: DashboardServer, connect_pail: Pail
) -> None:
    connect_pail.enqueue({"n": 1})
    connect_pail.store.put(connect_pail.keys.paused(), b"<script>alert(1)</script>\xff")
    client = Client(server)

    status, _, page = client.request("GET", "/q/_")

    assert status == 200 and "<strong>Paused</strong> since" in page
    assert "<script>alert(1)" not in page
