"""Who can use the dashboard, without a browser: its host name, one-time tokens, sessions, CSRF.

A real ``DashboardServer`` on 127.0.0.1 over the real local S3 server;
requests go out with ``http.client`` so that Host, Origin and Cookie can be
forged the way another local program would (docs/operate.md, "Who can use
the dashboard").
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from urllib.parse import urlencode, urlsplit

import pytest

from pail import JobState, Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.access import TOKEN_TTL, Access
from pail.dashboard.server import COOKIE
from pail.local import LocalS3
from tests.support.population import Population, populate

pytestmark = pytest.mark.s3

Answer = tuple[int, dict[str, str], str]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(
    server: DashboardServer,
    method: str,
    path: str,
    *,
    host: str | None = None,
    cookie: str = "",
    body: str = "",
    headers: dict[str, str] | None = None,
) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sent = {"Host": host if host is not None else server.host}
    if cookie:
        sent["Cookie"] = cookie
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


def open_session(server: DashboardServer, link: str | None = None) -> str:
    """Follow a link as a browser would; return the ``Cookie`` header it set."""
    parts = urlsplit(link if link is not None else server.link())
    status, headers, _ = request(server, "GET", f"{parts.path}?{parts.query}")
    assert status == 200, status
    return headers["set-cookie"].split(";", 1)[0]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pail(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]


@pytest.fixture
def server(pail: Pail, clock: FakeClock) -> Iterator[DashboardServer]:
    board = Dashboard(pail.store, interval=1.0)
    with DashboardServer(board, access=Access(clock=clock)) as running:
        yield running


def test_given_the_printed_link_then_it_names_a_random_localhost_host_and_sets_a_host_only_cookie(
    server: DashboardServer,
) -> None:
    parts = urlsplit(server.link())
    assert parts.hostname is not None and parts.port == server.port
    label, _, rest = parts.hostname.partition(".")
    assert rest == "localhost" and re.fullmatch(r"[0-9a-f]{32}", label)
    assert Access().nonce != Access().nonce

    status, headers, _ = request(server, "GET", f"/?{parts.query}")

    cookie = headers["set-cookie"]
    assert status == 200 and cookie.startswith(f"{COOKIE}=")
    attributes = [a.strip().split("=", 1)[0].lower() for a in cookie.split(";")[1:]]
    assert "domain" not in attributes  # host-only: sent to <nonce>.localhost and no other name
    assert {"httponly", "samesite", "path"} <= set(attributes)


def test_given_a_session_when_used_on_a_shared_loopback_host_name_then_refused(
    server: DashboardServer,
) -> None:
    cookie = open_session(server)
    port = server.port

    own = request(server, "GET", "/", cookie=cookie)
    shared = [
        request(server, "GET", "/", host=host, cookie=cookie)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}")
    ]

    assert own[0] == 200
    assert [answer[0] for answer in shared] == [403, 403, 403]
    assert all("csrf" not in answer[2] for answer in shared)


def test_given_a_link_when_opened_twice_then_the_second_opens_nothing(
    server: DashboardServer,
) -> None:
    link = server.link()
    open_session(server, link)
    parts = urlsplit(link)

    status, headers, body = request(server, "GET", f"/?{parts.query}")

    assert status == 403 and "set-cookie" not in headers
    assert "open a link" in body


def test_given_a_link_older_than_its_lifetime_when_opened_then_it_opens_nothing(
    server: DashboardServer, clock: FakeClock
) -> None:
    fresh, late = server.link(), server.link()
    clock.now += TOKEN_TTL - 1
    open_session(server, fresh)
    clock.now += 2

    status, headers, _ = request(server, "GET", f"/?{urlsplit(late).query}")

    assert status == 403 and "set-cookie" not in headers


def test_given_a_used_link_reopened_with_a_session_then_the_token_is_dropped_from_the_address(
    server: DashboardServer,
) -> None:
    link = server.link()
    cookie = open_session(server, link)

    status, headers, body = request(server, "GET", f"/q/_?{urlsplit(link).query}", cookie=cookie)

    assert status == 200 and 'content="0;url=/q/_"' in body and "set-cookie" not in headers


@pytest.mark.parametrize("value", ["%C3%A9", "%FF", "%ED%A0%80", "\u00e9".encode().hex()])
def test_given_a_non_ascii_token_when_opened_then_403_not_a_crash(
    server: DashboardServer, value: str
) -> None:
    status, _, body = request(server, "GET", f"/?token={value}")

    assert status == 403 and "Traceback" not in body
    assert request(server, "GET", "/", cookie=open_session(server))[0] == 200  # still serving


def test_given_a_non_ascii_csrf_value_when_posted_then_403_and_nothing_changes(
    server: DashboardServer, pail: Pail
) -> None:
    population: Population = populate(pail, hostile=False)
    cookie = open_session(server)

    status, _, body = request(
        server,
        "POST",
        f"/q/_/dlq/{population.dead}/redrive",
        cookie=cookie,
        body="csrf=%C3%A9",
    )

    assert status == 403 and "session token" in body
    assert pail.status(population.dead).state is JobState.FAILED  # type: ignore[union-attr]


def test_given_a_non_ascii_cookie_or_host_when_requested_then_403_not_a_crash(
    server: DashboardServer,
) -> None:
    # http.client sends str headers as latin-1: these reach the server as raw bytes.
    odd_cookie = request(server, "GET", "/", cookie=f"{COOKIE}=\u00e9\u00ff")
    odd_host = request(server, "GET", "/", host="\u00e9.localhost")

    assert odd_cookie[0] == 403 and odd_host[0] == 403


def test_given_a_post_from_the_loopback_origin_then_refused(
    server: DashboardServer, pail: Pail
) -> None:
    population = populate(pail, hostile=False)
    cookie = open_session(server)
    _, _, page = request(server, "GET", "/q/_/dlq", cookie=cookie)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]

    status, _, _ = request(
        server,
        "POST",
        f"/q/_/dlq/{population.dead}/redrive",
        cookie=cookie,
        body=urlencode({"csrf": token}),
        headers={"Origin": f"http://127.0.0.1:{server.port}"},
    )

    assert status == 403
    assert pail.status(population.dead).state is JobState.FAILED  # type: ignore[union-attr]


def test_given_the_status_page_then_it_has_its_own_origin_and_a_strict_policy(
    server: DashboardServer, pail: Pail, s3_server: LocalS3
) -> None:
    job_id = pail.enqueue({"n": 1})
    cookie = open_session(server)
    _, _, job_page = request(server, "GET", f"/q/_/job/{job_id}", cookie=cookie)
    link = re.search(r'href="([^"]*/status-page#[^"]*)"', job_page).group(1)  # type: ignore[union-attr]
    parts = urlsplit(link.replace("&amp;", "&"))
    loopback = f"127.0.0.1:{server.port}"

    status, headers, body = request(server, "GET", parts.path, host=loopback)  # no cookie
    on_forms_origin = request(server, "GET", "/status-page", cookie=cookie)

    assert parts.netloc == loopback  # not the origin of the action forms
    assert status == 200 and "<script>" in body
    directives = (
        part.strip().partition(" ") for part in headers["content-security-policy"].split(";")
    )
    policy = {name: value for name, _, value in directives}
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", policy["script-src"])
    assert policy["connect-src"] == s3_server.endpoint_url.rstrip("/")  # the bucket's endpoint only
    assert headers["referrer-policy"] == "no-referrer" and "set-cookie" not in headers
    assert on_forms_origin[0] == 404


@pytest.mark.parametrize("path", ["//attacker.example/x", "/\\attacker.example/x"])
def test_given_a_link_whose_path_names_another_host_when_opened_then_it_stays_on_this_server(
    server: DashboardServer, path: str
) -> None:
    token = urlsplit(server.link()).query

    status, headers, body = request(server, "GET", f"{path}?{token}")

    target = re.search(r'content="0;url=([^"]*)"', body)
    assert status == 200 and "set-cookie" in headers and target is not None
    assert target.group(1).startswith("/") and not target.group(1).startswith(("//", "/\\"))
