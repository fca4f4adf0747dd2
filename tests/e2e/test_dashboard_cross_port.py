"""Another program on another loopback port neither receives nor can use the dashboard's session.

Browsers scope cookies by host name, not by port: a cookie the dashboard set
on ``127.0.0.1`` went to every program a browser visits on
``127.0.0.1:OTHER``, which could replay it. Here a headless Chromium opens a
session through the printed link, then visits a page served by another
program on another loopback port (as ``127.0.0.1:OTHER`` and
``localhost:OTHER``). That program records the ``Cookie`` headers it is
sent, and its page tries to read the dashboard and to redrive a dead letter
with the browser's credentials, at the dashboard's port on ``127.0.0.1``
and at its secret host name (the worst case: the program learnt the name).
Nothing it receives opens a page, and nothing it sends changes the bucket.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

import pytest

from pail import JobState, Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.server import COOKIE
from pail.local import LocalS3
from pail.serving import BackgroundServer, QuietThreadingServer
from tests.e2e.conftest import TIMEOUT_MS, open_session
from tests.support.population import Population, populate

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.s3

ATTACK = """<!doctype html><title>other program</title>
<script type="application/json" id="target">TARGET</script><script>
(async () => {
  const target = JSON.parse(document.getElementById("target").textContent);
  const results = {};
  async function attempt(name, url, init) {
    try {
      const response = await fetch(url, init);
      results[name] = response.type === "opaque" ? "opaque" : `${response.status}:${await response.text()}`;
    } catch (error) {
      results[name] = `error:${error.message}`;
    }
  }
  const post = {
    method: "POST", mode: "no-cors", credentials: "include",
    headers: { "Content-Type": "application/x-www-form-urlencoded" }, body: "csrf=guess",
  };
  for (const origin of target.dashboards) {
    await attempt(`read ${origin}`, `${origin}/q/_/dlq`, { credentials: "include" });
    await attempt(`redrive ${origin}`, `${origin}/q/_/dlq/${target.dead}/redrive`, post);
  }
  for (const origin of target.own) {
    await attempt(`own ${origin}`, `${origin}/probe`, { credentials: "include" });
  }
  window.results = results;
  document.title = "done";
})();
</script>"""


class _Recorder(BaseHTTPRequestHandler):
    server: _RecordingServer

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.cookies.append((self.path, self.headers.get("Cookie", "")))
        body = self.server.page if self.path == "/" else b"probe"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin", "*"))
        self.send_header("Access-Control-Allow-Credentials", "true")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class _RecordingServer(QuietThreadingServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.cookies: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.page = b""


class OtherProgram(BackgroundServer[_RecordingServer]):
    """A program on another loopback port: it serves a page and records the cookies it gets."""

    def __init__(self) -> None:
        super().__init__("other-program")

    def bind(self) -> _RecordingServer:
        return _RecordingServer()


@pytest.fixture
def queue(s3_server: LocalS3, bucket: str) -> tuple[Pail, Population]:
    pail = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    return pail, populate(pail, hostile=False)


@pytest.fixture
def dashboard(queue: tuple[Pail, Population]) -> Iterator[DashboardServer]:
    with DashboardServer(Dashboard(queue[0].store)) as running:
        yield running


@pytest.fixture
def other() -> Iterator[OtherProgram]:
    with OtherProgram() as running:
        yield running


def _replay(dashboard: DashboardServer, host: str, cookie: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=30)
    try:
        connection.request("GET", "/q/_/dlq", headers={"Host": host, "Cookie": cookie})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_given_a_dashboard_session_when_a_page_on_another_loopback_port_opens_then_it_gets_no_session(
    browser: Browser,
    dashboard: DashboardServer,
    other: OtherProgram,
    queue: tuple[Pail, Population],
) -> None:
    pail, population = queue
    other_port = other.server.server_address[1]
    own = [f"http://127.0.0.1:{other_port}", f"http://localhost:{other_port}"]
    target = {
        "dashboards": [dashboard.status_page_origin, dashboard.origin],
        "dead": population.dead,
        "own": own,
    }
    other.server.page = ATTACK.replace("TARGET", json.dumps(target)).encode()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        opened = open_session(page, dashboard.link(), dashboard.origin)
        assert opened is not None and opened.ok and "csrf" not in page.url
        assert [c["name"] for c in context.cookies()] == [COOKIE]  # the session exists

        results: dict[str, dict[str, str]] = {}
        for origin in own:
            page.goto(f"{origin}/")
            page.wait_for_function("document.title === 'done'")
            results[origin] = page.evaluate("window.results")

        page.goto(f"{dashboard.origin}/q/_/dlq")  # the session still works where it belongs
        assert page.locator("h1").inner_text().startswith("Dead-letter queue")
    finally:
        context.close()

    with other.server.lock:
        received = list(other.server.cookies)
    paths = sorted(path for path, _ in received if path != "/favicon.ico")
    assert paths == ["/"] * len(own) + ["/probe"] * len(own) ** 2  # every page and probe arrived
    assert all(COOKIE not in cookie for _, cookie in received), received
    for origin, answers in results.items():
        for name, answer in answers.items():
            if name.startswith("read "):
                assert answer.startswith("error:"), (origin, name, answer)  # nothing readable
    everything = "; ".join(cookie for _, cookie in received if cookie)
    assert _replay(dashboard, dashboard.host, everything) == 403
    assert _replay(dashboard, f"127.0.0.1:{dashboard.port}", everything) == 403
    status = pail.status(population.dead)
    assert status is not None and status.state is JobState.FAILED  # no redrive got through
