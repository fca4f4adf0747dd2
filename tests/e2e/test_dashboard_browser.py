"""``pail dashboard`` in a real headless Chromium, over a real local S3 server.

The bucket holds a queue with jobs in every state and foreign objects in
every prefix (``tests/support/population.py``), and a second queue. Each
test drives the page as a person would, waiting with Playwright's
auto-waiting ``expect``; no sleeps. A page script error, or any dialog (an
``alert`` from injected markup would be one), fails the test.

Screenshots of every view go to the test's ``tmp_path``, or, with
``PAIL_SCREENSHOTS=docs/dashboard``, to the folder the README shows
(``scripts/dashboard-screenshots`` does that).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from pail import JobState, Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.local import LocalS3
from tests.e2e.conftest import TIMEOUT_MS, open_session
from tests.support.population import GARBAGE_ID, HOLDER, HTML_ID, NAN_ID, Population, populate

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_TABS = 80
"""A bound on Tab presses while looking for a control: the page has fewer stops than this."""


def expect() -> Any:
    """Playwright's auto-waiting ``expect`` (imported late, as the fixtures do)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = os.environ.get("PAIL_SCREENSHOTS")
    folder = ROOT / target if target else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(page: Page, folder: Path, name: str) -> None:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes().startswith(PNG_SIGNATURE)


@pytest.fixture
def queue(s3_server: LocalS3, bucket: str) -> tuple[Pail, Population]:
    pail = Pail.connect(bucket, **s3_server.connect_kwargs())  # type: ignore[arg-type]
    population = populate(pail)
    reports = Pail.connect(bucket, queue="reports", **s3_server.connect_kwargs())  # type: ignore[arg-type]
    reports.enqueue_many([{"report": n} for n in range(3)])
    reports.work_once(lambda payload: {"ok": True})
    return pail, population


@pytest.fixture
def interval() -> float:
    """The refresh interval: the CLI's default (a test that watches refreshes overrides it)."""
    return 10.0


@pytest.fixture
def server(queue: tuple[Pail, Population], interval: float) -> Iterator[DashboardServer]:
    pail, _ = queue
    with DashboardServer(Dashboard(pail.store, interval=interval)) as running:
        yield running


@pytest.fixture
def board(browser: Browser, server: DashboardServer) -> Iterator[Page]:
    """A page with a session opened through the printed link."""
    context = browser.new_context(viewport={"width": 1200, "height": 860}, device_scale_factor=1)
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
        yield page
    finally:
        context.close()
    assert not errors, f"the page's script raised or opened a dialog: {errors}"


def test_given_a_bucket_when_the_overview_opens_then_every_queue_with_its_counts(
    board: Page, server: DashboardServer, shots: Path
) -> None:
    rows = board.locator("table.census tbody tr")
    expect()(rows).to_have_count(2)
    default = rows.nth(0)
    expect()(default.locator("th a")).to_have_text("(default)")
    # pending, delayed, waiting, running, done, dead-lettered, cancelled, foreign
    cells = default.locator("td.num")
    expect()(cells.nth(0)).to_have_text("3")
    expect()(cells.nth(1)).to_have_text("1")
    expect()(cells.nth(2)).to_have_text("0")
    expect()(cells.nth(3)).to_have_text("2")
    expect()(cells.nth(4)).to_have_text("2")
    expect()(cells.nth(5)).to_have_text("4")
    expect()(cells.nth(6)).to_have_text("1")
    expect()(cells.nth(7)).to_have_text("5")
    expect()(rows.nth(1).locator("th")).to_have_text("reports")
    expect()(board.locator("#requests-per-minute")).to_have_text(
        str(server.board.requests_last_minute()["total"])
    )
    screenshot(board, shots, "overview")


def test_given_the_queue_page_then_chart_running_jobs_and_failures_show_and_foreign_objects_too(
    board: Page, queue: tuple[Pail, Population], shots: Path
) -> None:
    _, population = queue
    board.get_by_role("link", name="(default)").first.click()
    expect()(board.locator("h1")).to_have_text("Queue (default)")
    expect()(board.locator("svg.chart desc")).to_contain_text("jobs finished in the last hour")
    running = board.locator("#running tbody tr", has_text=population.running)
    expect()(running).to_contain_text(HOLDER)
    expect()(running).to_contain_text("3/8 (38%) · rendering charts")
    expect()(board.locator("#running")).to_contain_text("not a job")  # the run/ folder marker
    expect()(board.locator("#running tbody tr", has_text=NAN_ID)).to_contain_text("unreadable")
    failures = board.locator("#failures")
    expect()(failures).to_contain_text("report q3-poison failed")
    expect()(failures.locator("tr", has_text=population.retrying)).to_contain_text("will retry")
    expect()(failures).to_contain_text(HTML_ID)  # shown as text, never as markup
    screenshot(board, shots, "queue")


def test_given_each_state_when_its_job_list_opens_then_its_jobs_are_listed_with_their_age(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population], shots: Path
) -> None:
    _, population = queue
    wanted = {
        "pending": population.pending[0],
        "delayed": population.delayed,
        "running": population.running,
        "done": population.done[0],
        "cancelled": population.cancelled,
    }
    for state, job_id in wanted.items():
        board.goto(f"{server.origin}/q/_/jobs?state={state}")
        row = board.locator("#jobs tbody tr", has_text=job_id)
        expect()(row).to_have_count(1)
        expect()(row.locator("td").nth(1)).to_have_text(state)
        if state == "pending":
            expect()(board.locator("#jobs")).to_contain_text("photos/cat.jpg")
            screenshot(board, shots, "jobs-pending")


def test_given_a_dead_letter_when_inspected_then_payload_error_and_traceback_show(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population], shots: Path
) -> None:
    _, population = queue
    board.goto(f"{server.origin}/q/_/dlq")
    expect()(board.locator("#jobs tbody tr")).to_have_count(5)  # 4 letters and the dlq/ marker
    screenshot(board, shots, "dlq")
    board.get_by_role("link", name=f"Inspect {population.dead}").click()
    expect()(board.locator("h1")).to_have_text(f"Dead letter {population.dead}")
    expect()(board.locator("main")).to_contain_text("RuntimeError")
    expect()(board.locator("main")).to_contain_text('"report": "q3-poison"')
    board.locator("summary", has_text="Traceback").click()
    expect()(board.locator("details pre")).to_contain_text("Traceback (most recent call last)")
    screenshot(board, shots, "dead-letter")
    board.goto(f"{server.origin}/q/_/dlq/{GARBAGE_ID}")
    expect()(board.locator("main")).to_contain_text("Unreadable record")
    expect()(board.locator("main pre")).to_contain_text("<b>bold</b>")
    board.goto(f"{server.origin}/q/_/dlq/{quote(HTML_ID, safe='')}")
    expect()(board.locator("h1")).to_have_text(f"Dead letter {HTML_ID}")
    expect()(board.locator("main pre")).to_contain_text("<script>alert(1)</script>")


def test_given_a_dead_letter_when_deleted_after_confirming_then_it_is_gone_and_the_job_stays_failed(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population], shots: Path
) -> None:
    pail, population = queue
    board.goto(f"{server.origin}/q/_/dlq/{population.dead}")
    board.get_by_role("link", name="Delete…").click()
    expect()(board.locator("h1")).to_have_text(f"Delete dead letter {population.dead}")
    assert pail.store.head(pail.keys.dlq(population.dead)) is not None  # nothing yet
    screenshot(board, shots, "confirm-delete")
    board.get_by_role("button", name="Delete dead letter").click()
    expect()(board.locator("#notice")).to_contain_text(f"Dead letter {population.dead} was deleted")
    expect()(board.locator("#jobs tbody tr", has_text=population.dead)).to_have_count(0)
    status = pail.status(population.dead)
    assert status is not None and status.state is JobState.FAILED


def test_given_only_a_keyboard_when_redriving_a_dead_letter_then_tab_and_enter_do_it(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population]
) -> None:
    pail, population = queue
    board.goto(f"{server.origin}/q/_/dlq")
    target = f"redrive-{population.dead}"
    reached = False
    for _ in range(MAX_TABS):
        board.keyboard.press("Tab")
        focused = board.evaluate("document.activeElement && document.activeElement.id")
        if focused == target:
            reached = True
            break
    assert reached, f"Tab never reached the Redrive button of {population.dead}"
    outline = board.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focus is visible
    board.keyboard.press("Enter")
    expect()(board.locator("#notice")).to_contain_text(f"Job {population.dead} was sent back")
    status = pail.status(population.dead)
    assert status is not None and status.state is JobState.PENDING


def test_given_the_job_page_of_a_running_job_then_holder_renewal_and_progress_show(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population], shots: Path
) -> None:
    _, population = queue
    board.goto(f"{server.origin}/q/_")
    board.locator("#running").get_by_role("link", name=population.running).click()
    expect()(board.locator("#job-state")).to_have_text("running")
    expect()(board.locator("main")).to_contain_text(HOLDER)
    expect()(board.locator("#progress")).to_contain_text("rendering charts")
    screenshot(board, shots, "job-running")
    board.goto(f"{server.origin}/q/_/job/{population.retrying}")
    expect()(board.locator("#headline")).to_have_text("Waiting to retry: attempt 1 failed.")
    expect()(board.locator("main")).to_contain_text("report q6-flaky failed")


# A short interval, so that the refresh comes soon (the CLI's floor is 2 s).
@pytest.mark.parametrize("interval", [0.5])
def test_given_the_queue_page_open_when_a_job_is_enqueued_then_the_count_updates_in_place(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population]
) -> None:
    pail, _ = queue
    board.goto(f"{server.origin}/q/_")
    pending = board.locator("#counts td.num").first
    expect()(pending).to_have_text("3")
    board.evaluate("window.__same_document = true")

    pail.enqueue({"report": "late"})

    expect()(pending).to_have_text("4")
    assert board.evaluate("window.__same_document") is True  # refreshed in place, not reloaded


def test_given_the_queue_page_when_paused_and_resumed_after_confirming_then_it_shows_each_state(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population], shots: Path
) -> None:
    pail, _ = queue
    board.goto(f"{server.origin}/q/_")
    board.get_by_role("link", name="Pause…").click()
    expect()(board.locator("h1")).to_have_text("Pause (default)")
    assert pail.paused() is None  # the confirmation page changed nothing
    board.get_by_label("Reason").fill("deploying v2")
    board.get_by_role("button", name="Pause the queue").click()

    expect()(board.locator("#notice")).to_contain_text("The queue is paused")
    expect()(board.locator("#queue-pause")).to_contain_text("Paused since")
    expect()(board.locator("#queue-pause")).to_contain_text("deploying v2")
    state = pail.paused()
    assert state is not None and state.reason == "deploying v2"
    assert pail.work_once(lambda payload: payload) is False  # workers claim nothing
    screenshot(board, shots, "queue-paused")
    board.goto(server.origin)
    expect()(board.locator("table.census tbody tr").nth(0).locator(".badge")).to_have_text("paused")

    board.goto(f"{server.origin}/q/_")
    board.get_by_role("link", name="Resume…").click()
    board.get_by_role("button", name="Resume the queue").click()

    expect()(board.locator("#notice")).to_contain_text("The queue was resumed")
    expect()(board.locator("#pause-queue")).to_be_visible()
    assert pail.paused() is None


def test_given_the_queue_page_when_a_limit_is_set_after_confirming_then_its_section_shows_it(
    board: Page, server: DashboardServer, queue: tuple[Pail, Population]
) -> None:
    pail, _ = queue
    board.goto(f"{server.origin}/q/_")
    expect()(board.locator("#queue-limits")).to_contain_text("no limits")
    board.get_by_text("Change limits…").click()
    board.get_by_label("Jobs running at once").fill("abc")
    board.get_by_role("button", name="Set concurrency…").click()

    expect()(board.locator("#notice")).to_contain_text("Nothing changed")
    assert pail.store.get(pail.keys.limits()) is None

    board.get_by_text("Change limits…").click()
    board.get_by_label("Jobs running at once").fill("2")
    board.locator("#concurrency-group").fill("*")
    board.get_by_role("button", name="Set concurrency…").click()
    expect()(board.locator("h1")).to_have_text("Limits of (default)")
    assert pail.store.get(pail.keys.limits()) is None  # the confirmation page changed nothing
    board.get_by_role("button", name="Set the concurrency limit").click()

    expect()(board.locator("#notice")).to_contain_text("every group runs at most 2 job(s)")
    expect()(board.locator("#queue-limits")).to_contain_text(
        "each group: at most 2 running at once"
    )
    assert pail.limits().group_concurrency == 2
