"""The status page in a real headless Chromium, polling a real S3 server that applies CORS.

Each test drives the job with the runtime (enqueue, ``work_once``, claim)
and waits on what the page shows with Playwright's auto-waiting
``expect``: no sleeps. Screenshots land in the test's ``tmp_path``.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pail import JobState, Pail
from pail.local import LocalS3
from pail.status_page import StatusPageServer, serve_status_page
from tests.e2e.conftest import (
    EXAMPLE_PAGE,
    POLL_INTERVAL,
    POLL_MAX_INTERVAL,
    TIMEOUT_MS,
    OpenJob,
)
from tests.support.queues import connect_to

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.s3

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def expect_text(page: Page, selector: str, text: str) -> None:
    from playwright.sync_api import expect

    expect(page.locator(selector)).to_have_text(text, timeout=TIMEOUT_MS)


def expect_contains(page: Page, selector: str, text: str) -> None:
    from playwright.sync_api import expect

    expect(page.locator(selector)).to_contain_text(text, timeout=TIMEOUT_MS)


def expect_polling(page: Page, value: str) -> None:
    from playwright.sync_api import expect

    expect(page.locator("body")).to_have_attribute("data-polling", value, timeout=TIMEOUT_MS)


def screenshot(page: Page, path: Path) -> Path:
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    return path


def test_given_a_pending_job_when_a_worker_runs_it_then_the_page_shows_running_then_the_result(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    pail = connect()
    job_id = pail.enqueue({"report": "q3", "region": "eu"})
    open_job(pail, job_id)
    expect_text(page, "#state", "pending")
    expect_text(page, "#job-id", job_id)
    expect_contains(page, "#headline", "Waiting in the queue")
    screenshot(page, tmp_path / "pending.png")

    # The handler runs on the drain's own thread and Playwright's page belongs
    # to this one: the handler waits while this thread looks at the page.
    started, looked = threading.Event(), threading.Event()

    def build_report(payload: dict[str, Any]) -> dict[str, Any]:
        started.set()
        if not looked.wait(TIMEOUT_MS / 1000 * 2):
            raise TimeoutError("the test never looked at the running page")
        return {"report": payload["report"], "pages": 12, "url": "s3://reports/q3.pdf"}

    with ThreadPoolExecutor(max_workers=1) as pool:
        worked = pool.submit(pail.work_once, build_report)
        assert started.wait(TIMEOUT_MS / 1000)
        try:
            expect_text(page, "#state", "running")
            expect_contains(page, "#headline", "attempt 1")
        finally:
            looked.set()
        assert worked.result()
    expect_text(page, "#state", "done")
    expect_contains(page, "#result", '"pages": 12')
    expect_contains(page, "#result", '"url": "s3://reports/q3.pdf"')
    expect_polling(page, "off")
    screenshot(page, tmp_path / "done.png")


def test_given_a_running_job_when_it_reports_progress_then_the_page_shows_the_progress(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    pail = connect()
    job_id = pail.enqueue({"export": "customers"})
    message = pail.claim()
    assert message is not None and message.id == job_id
    open_job(pail, job_id)
    expect_text(page, "#state", "running")

    message.progress({"done": 2, "total": 5, "message": "exporting rows"})
    message.lease.renew()  # progress is written with the next renewal: do it now
    expect_text(page, "#progress-text", "40% · 2 / 5 · exporting rows")
    expect_contains(page, "#facts", message.lease.record.owner)
    screenshot(page, tmp_path / "running.png")

    assert message.complete({"rows": 5})
    expect_text(page, "#state", "done")
    expect_contains(page, "#result", '"rows": 5')


def test_given_a_job_that_always_fails_when_it_is_dead_lettered_then_the_page_shows_the_error(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    pail = connect(max_retries=1)
    job_id = pail.enqueue({"report": "broken"})
    open_job(pail, job_id)
    expect_text(page, "#state", "pending")

    def broken(payload: Any) -> None:
        raise ValueError("the report template is missing")

    assert pail.work_once(broken)  # a job was processed (and failed)
    # One retry left: pending again, with the first attempt's error shown.
    expect_text(page, "#state", "pending")
    expect_contains(page, "#headline", "attempt 1 failed")
    expect_text(page, "#error-title", "Last error (attempt 1)")
    expect_text(page, "#error-type", "ValueError")

    assert pail.work_once(broken)  # a job was processed (and failed)
    expect_text(page, "#state", "failed")
    expect_contains(page, "#headline", "after 2 attempt(s)")
    expect_text(page, "#error-type", "ValueError")
    expect_text(page, "#error-message", "the report template is missing")
    expect_contains(page, "#error-traceback", "ValueError: the report template is missing")
    expect_polling(page, "off")
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.FAILED
    screenshot(page, tmp_path / "failed.png")


def test_given_a_cancelled_job_when_the_page_polls_then_it_shows_cancelled_and_stops(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    # Hostile review, defect 9: it said "Failed; the dead letter is being written." forever.
    pail = connect()
    job_id = pail.enqueue({"report": "q4"})
    open_job(pail, job_id)
    expect_text(page, "#state", "pending")

    assert pail.cancel(job_id) is True

    expect_text(page, "#state", "cancelled")
    expect_contains(page, "#headline", "Cancelled")
    expect_text(page, "#step-end", "Cancelled")
    expect_polling(page, "off")
    screenshot(page, tmp_path / "cancelled.png")


@pytest.mark.parametrize("how", ["delayed", "high"])
def test_given_a_job_waiting_in_a_delayed_entry_when_the_page_polls_then_it_shows_pending(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path, how: str
) -> None:
    # Hostile review, defect 9: all four links answered 404, the page said "Unknown" and stopped.
    pail = connect()
    if how == "delayed":
        job_id = pail.enqueue({"report": "later"}, delay=3600)
    else:
        job_id = pail.enqueue({"report": "urgent"}, priority="high")
    open_job(pail, job_id)

    expect_text(page, "#state", "pending")
    if how == "delayed":
        expect_contains(page, "#headline", "Scheduled: not before")
        expect_contains(page, "#facts", "Not before")
    else:
        expect_contains(page, "#headline", "High priority")
    expect_polling(page, "on")
    screenshot(page, tmp_path / f"{how}.png")
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    if how == "high":  # promoted and run: the page follows it to the end
        assert pail.work_once(lambda p: {"done": p["report"]})
        expect_text(page, "#state", "done")
        expect_contains(page, "#result", '"done": "urgent"')


def test_given_a_job_waiting_for_its_dependencies_when_they_succeed_then_the_page_follows_it(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    pail = connect()
    flow = pail.enqueue_flow([{"report": "eu"}, {"report": "us"}], then={"report": "merge"})
    open_job(pail, flow.then)

    expect_text(page, "#state", "pending")
    expect_contains(page, "#headline", "Waiting for its dependencies: 0 of 2 succeeded.")
    assert pail.work_once(lambda p: {"done": p["report"]})
    expect_contains(page, "#headline", "Waiting for its dependencies: 1 of 2 succeeded.")
    screenshot(page, tmp_path / "waiting.png")
    while pail.work_once(lambda p: {"done": p["report"]}):
        pass
    expect_text(page, "#state", "done")
    expect_contains(page, "#result", '"done": "merge"')


def _refused(url: str) -> int | None:
    """The HTTP status if the server refuses ``url``, else None."""
    try:
        with urllib.request.urlopen(url, timeout=5):
            return None
    except urllib.error.HTTPError as exc:
        return exc.code


def test_given_expired_links_when_the_page_opens_then_it_says_so_and_stops_polling(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page, tmp_path: Path
) -> None:
    pail = connect()
    job_id = pail.enqueue({"report": "late"})
    urls = pail.status_urls(job_id, expires_in=1)
    # Wait for the server itself to refuse the link (a bounded poll on the condition).
    deadline = time.monotonic() + 10
    while (refused := _refused(urls["pending"])) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refused == 403

    open_job(pail, job_id, urls=urls)
    expect_contains(page, "#notice", "This status link has expired.")
    expect_contains(page, "#notice", f"pail url --status {job_id}")
    expect_polling(page, "off")
    expect_text(page, "#state", "unknown")
    screenshot(page, tmp_path / "expired.png")
    # The job itself is fine: only the link is stale.
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING


def test_given_a_tampered_link_when_the_page_opens_then_it_reports_the_refusal_not_expiry(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page
) -> None:
    pail = connect()
    job_id = pail.enqueue({"report": "tampered"})
    urls = {
        state: url.replace("Signature=", "Signature=AAAA")
        for state, url in pail.status_urls(job_id, 60).items()
    }
    assert all("Signature=AAAA" in url for url in urls.values())

    open_job(pail, job_id, urls=urls)
    expect_contains(page, "#notice", "The bucket refused this link (403).")
    expect_contains(page, "#notice", "SignatureDoesNotMatch")
    expect_polling(page, "off")


def test_given_an_origin_the_cors_rule_does_not_allow_when_the_page_polls_then_it_cannot_read(
    connect: Callable[..., Pail], open_job: OpenJob, page: Page
) -> None:
    pail = connect()
    job_id = pail.enqueue({"report": "elsewhere"})
    urls = pail.status_urls(job_id, 60)
    assert _refused(urls["pending"]) is None  # the link itself is good

    with StatusPageServer(html=EXAMPLE_PAGE.read_bytes()) as other:
        open_job(pail, job_id, urls=urls, server=other)
        expect_contains(page, "#notice", "Can't reach the bucket.")
        expect_contains(page, "#notice", f"does not allow GET from {other.origin}")
        expect_text(page, "#state", "unknown")
        expect_polling(page, "on")  # a network failure may be transient: it keeps trying


def test_given_the_embedded_server_when_the_demo_serves_the_page_then_it_follows_the_job(
    s3_server: LocalS3, bucket: str, page: Page
) -> None:
    """What ``pail demo --open-status`` does: moto, the packaged page (polling faster here)."""
    pail = connect_to(s3_server.connect_kwargs(), bucket)
    job_id = pail.enqueue({"demo": True})
    url, stop = serve_status_page(
        pail, job_id, interval=POLL_INTERVAL, max_interval=POLL_MAX_INTERVAL
    )
    try:
        page.goto(url)
        expect_text(page, "#state", "pending")
        assert pail.work_once(lambda payload: {"echo": payload})
        expect_text(page, "#state", "done")
        expect_contains(page, "#result", '"demo": true')
    finally:
        stop()
