"""Browser fixtures: the system Chromium under Playwright, the page server, a CORS-ruled bucket.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it), driven
by the ``playwright`` package from the ``dev`` extra pointed at
``/usr/bin/chromium``: no browser is ever downloaded. Without Chromium the
browser tests skip, except under CI (``CI`` set), where they fail.

The browser tests run on SeaweedFS (``seaweed_server``), not on moto: moto's
server answers every origin with ``Access-Control-Allow-Origin`` whatever
the bucket's CORS rule says, and never expires a presigned URL, so a page
that passes there proves nothing about CORS or expiry. SeaweedFS applies
the bucket's rule (on 200, 404 and 403 answers and on preflights) and
refuses expired URLs with 403, as S3 does.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pail import Pail
from pail.status_page import StatusPageServer, cors_rule, status_page_url
from tests.servers import SeaweedS3, make_s3_client
from tests.support.queues import connect_to

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PAGE = ROOT / "examples" / "status-page" / "index.html"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
# Generous: two shared cores, and a poll cycle is at most 0.5 s in these tests.
TIMEOUT_MS = 15_000
# Fast polling so that the page notices each change quickly.
POLL_INTERVAL = 0.1
POLL_MAX_INTERVAL = 0.5

_bucket_numbers = itertools.count()

OpenJob = Callable[..., None]


def open_session(page: Page, link: str, origin: str) -> Response | None:
    """Open a dashboard session through ``link``; wait until its landing page moved on.

    The landing page moves to the dashboard with a ``<meta http-equiv="refresh">``
    after its ``load`` event, where ``page.goto`` returns. A test that navigated
    at once raced that refresh, which could land after it (the page showed the
    overview instead of the page the test asked for). Returns the landing page's
    response.
    """
    landing = page.goto(link)
    page.wait_for_url(f"{origin}/")
    return landing


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def find_chromium() -> str | None:
    """Debian's Chromium, or another ``chromium`` on PATH."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session (Playwright gives it a temporary profile)."""
    executable = find_chromium()
    if executable is None:
        _unavailable("Chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install 'pailq[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (no shared cache or cookies) and one page in it.

    An uncaught exception in the page's script fails the test.
    """
    context = browser.new_context(viewport={"width": 820, "height": 560}, device_scale_factor=1)
    errors: list[str] = []
    try:
        opened = context.new_page()
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
    finally:
        context.close()
    assert not errors, f"the page's script raised: {errors}"


@pytest.fixture(scope="session")
def page_server() -> Iterator[StatusPageServer]:
    """The example page (the file in ``examples/``) served from 127.0.0.1."""
    with StatusPageServer(html=EXAMPLE_PAGE.read_bytes()) as server:
        yield server


@pytest.fixture
def cors_bucket(seaweed_server: SeaweedS3, page_server: StatusPageServer) -> str:
    """A new SeaweedFS bucket whose CORS rule allows GET from the page's origin only."""
    name = f"page-{os.getpid()}-{next(_bucket_numbers)}"
    client = make_s3_client(seaweed_server.connect_kwargs())
    client.create_bucket(Bucket=name)
    client.put_bucket_cors(
        Bucket=name, CORSConfiguration={"CORSRules": [cors_rule([page_server.origin])]}
    )
    return name


@pytest.fixture
def connect(seaweed_server: SeaweedS3, cors_bucket: str) -> Callable[..., Pail]:
    """``connect(**options)``: a ``Pail`` on the CORS-ruled bucket."""

    def make(**options: Any) -> Pail:
        return connect_to(seaweed_server.connect_kwargs(), cors_bucket, **options)

    return make


@pytest.fixture
def open_job(page: Page, page_server: StatusPageServer) -> OpenJob:
    """``open_job(pail, job_id, expires_in=60, urls=None, server=None)``: load the page for a job."""

    def load(
        pail: Pail,
        job_id: str,
        *,
        expires_in: int = 60,
        urls: dict[str, str] | None = None,
        server: StatusPageServer | None = None,
    ) -> None:
        links = urls if urls is not None else pail.status_urls(job_id, expires_in)
        link = status_page_url(
            (server or page_server).url,
            job_id,
            links,
            interval=POLL_INTERVAL,
            max_interval=POLL_MAX_INTERVAL,
        )
        page.goto(link)

    return load
