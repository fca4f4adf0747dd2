"""``pail dashboard --open`` in a real headless Chromium: the redirect file opens a session.

The browser starts on a local file (``cli.dashboard.write_redirect_file``),
so its way to the dashboard is a navigation from another site: a browser
sends no ``SameSite=Strict`` cookie along such a navigation's redirects, so
the token's answer must not be a redirect (a 303 landed on a 403 page here).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pail import MemoryStore
from pail.cli.dashboard import write_redirect_file
from pail.dashboard import Dashboard, DashboardServer
from tests.e2e.conftest import TIMEOUT_MS

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture
def dashboard() -> Iterator[DashboardServer]:
    with DashboardServer(Dashboard(MemoryStore("jobs"))) as running:
        yield running


def test_given_the_redirect_file_when_the_browser_opens_it_then_the_overview_shows_with_a_session(
    browser: Browser, dashboard: DashboardServer, tmp_path: Path
) -> None:
    opened = write_redirect_file(tmp_path, dashboard.link())
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)

        page.goto(opened.as_uri())
        page.wait_for_url(f"{dashboard.origin}/")

        assert page.locator("h1").inner_text() == "Queues"
        assert "token" not in page.url
        page.reload()  # and the session stays
        assert page.locator("h1").inner_text() == "Queues"
    finally:
        context.close()
