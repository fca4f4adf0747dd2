"""The dashboard's search box in a real headless Chromium, over a real local S3 server.

By tag, by id prefix, by state and by a time range (enqueued between two
times), with paging; a hostile tag value is shown as the text it is (an
``alert`` from injected markup would open a dialog, which fails the test).
A screenshot of the results goes to ``PAIL_SCREENSHOTS`` (docs/dashboard)
when set, else to the test's ``tmp_path``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ulid import ULID

from pail import Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.local import LocalS3
from tests.e2e.conftest import TIMEOUT_MS, open_session

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<img src=x onerror=alert(1)>"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


@pytest.fixture
def jobs(s3_server: LocalS3, bucket: str) -> tuple[Pail, list[str]]:
    """12 jobs enqueued ten minutes apart from T0: every third for customer acme, one hostile."""
    pail = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    ids = [str(ULID.from_datetime(T0 + timedelta(minutes=10 * n))) for n in range(12)]
    tags = [
        {"customer": "acme", "kind": "export"} if n % 3 == 0 else {"customer": f"c{n}"}
        for n in range(12)
    ]
    tags[5] = {"customer": HOSTILE, "note": "</td><script>alert(2)</script>"}
    pail.enqueue_many([{"n": n} for n in range(12)], ids=ids, tags=tags)
    return pail, ids


@pytest.fixture
def board(browser: Browser, jobs: tuple[Pail, list[str]]) -> Iterator[Page]:
    pail, _ = jobs
    with DashboardServer(Dashboard(pail.store, interval=10.0)) as server:
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        errors: list[str] = []
        try:
            page = context.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))

            def refuse(dialog: Dialog) -> None:
                errors.append(f"dialog: {dialog.message}")
                dialog.dismiss()

            page.on("dialog", refuse)
            page.set_default_timeout(TIMEOUT_MS)
            open_session(page, server.link(), server.origin)
            page.get_by_role("link", name="(default)").first.click()
            page.locator("#search-link").click()
            yield page
        finally:
            context.close()
        assert not errors, f"the page's script raised or opened a dialog: {errors}"


def _ids_shown(page: Page) -> list[str]:
    return [
        text.strip() for text in page.locator("#search-results tbody td code").all_inner_texts()
    ]


def test_given_tagged_jobs_when_searching_by_tag_then_only_theirs_and_the_cost_is_shown(
    board: Page, jobs: tuple[Pail, list[str]], tmp_path: Path
) -> None:
    _, ids = jobs
    board.locator("#search-tag-0").fill("customer=acme")
    board.locator("#search-submit").click()

    expect()(board.locator("#search-results caption")).to_have_text("4 job(s), oldest first")
    assert _ids_shown(board) == ids[::3]
    expect()(board.locator("#search-cost")).to_contain_text("the tag index: ")
    expect()(board.locator("#search-cost")).to_contain_text("1 ListObjectsV2")
    expect()(board.locator("#search-tag-0")).to_have_value("customer=acme")  # the form keeps it
    target = os.environ.get("PAIL_SCREENSHOTS")
    folder = ROOT / target if target else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    board.screenshot(path=str(folder / "search.png"), full_page=True)


def test_given_an_id_prefix_when_searching_then_the_job_and_a_link_to_it(
    board: Page, jobs: tuple[Pail, list[str]]
) -> None:
    _, ids = jobs
    board.locator("#search-q").fill(ids[7][:20])
    board.locator("#search-submit").click()

    assert _ids_shown(board) == [ids[7]]
    board.locator("#search-results tbody a").first.click()
    expect()(board.locator("h1")).to_have_text(f"Job {ids[7]}")


def test_given_a_time_range_and_a_state_when_searching_then_paged_in_order(
    board: Page, jobs: tuple[Pail, list[str]]
) -> None:
    _, ids = jobs
    board.locator("#search-since").fill("2026-03-01T09:15:00")
    board.locator("#search-until").fill("2026-03-01T10:35:00")
    board.locator("#search-state").select_option("pending")
    page_url = board.url
    board.locator("#search-submit").click()
    expect()(board).not_to_have_url(page_url)

    assert _ids_shown(board) == ids[2:10]  # 09:20 to 10:30; a page is 50, so all at once

    # Paging: the same window, three a page (the URL takes a limit), by the Next link.
    board.goto(board.url + "&limit=3")
    pages = [_ids_shown(board)]
    for _ in range(5):
        if board.locator("#search-next").count() == 0:
            break
        board.locator("#search-next").click()
        expect()(board).to_have_url(re.compile(f"after={pages[-1][-1]}"))
        pages.append(_ids_shown(board))
    assert pages == [ids[2:5], ids[5:8], ids[8:10]]


def test_given_hostile_tag_values_when_shown_then_they_stay_text(
    board: Page, jobs: tuple[Pail, list[str]]
) -> None:
    _, ids = jobs
    board.locator("#search-tag-0").fill(f"customer={HOSTILE}")
    board.locator("#search-submit").click()

    assert _ids_shown(board) == [ids[5]]
    tags = board.locator("#search-results td.tags")
    expect()(tags).to_contain_text(f"customer={HOSTILE}")
    expect()(tags).to_contain_text("note=</td><script>alert(2)</script>")
    assert board.locator("#search-results img").count() == 0
    assert board.locator("#search-results script").count() == 0
    board.locator("#search-results tbody a").first.click()  # the job's page shows them as text too
    expect()(board.locator("dl.facts")).to_contain_text(f"customer={HOSTILE}")
    assert board.locator("dl.facts img").count() == 0


def test_given_a_bad_field_when_searching_then_the_page_says_which(board: Page) -> None:
    board.locator("#search-tag-0").fill("no equals sign")
    board.locator("#search-submit").click()

    expect()(board.locator("#search-problem")).to_contain_text("must be key=value")
