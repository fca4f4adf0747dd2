"""Oversized foreign records: the dashboard reads at most ``MAX_READ`` bytes and shows at most
``MAX_SHOWN`` characters of a value, whatever a bucket writer put there (issue 23 item 4).

Before: an 8 MB traceback gave 21 MB letter and job pages, a 2 MB one 10 MB
pages, and the dashboard read (and kept) every byte.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pail import JobState, MemoryStore, Pail
from pail.codec import MESSAGE_LIMIT
from pail.dashboard import Dashboard, DashboardServer
from pail.dashboard.meter import MeteredStore, RequestMeter
from pail.dashboard.model import MAX_READ
from pail.dashboard.views import MAX_SHOWN
from pail.errors import ObjectTooLargeError
from pail.local import LocalS3
from tests.support.plain_store import PlainStore

pytestmark = pytest.mark.s3

PAGE_LIMIT = 200_000
"""Bytes a page may take here: a few values of MAX_SHOWN characters, escaped, and the layout."""


class Browser:
    def __init__(self, server: DashboardServer) -> None:
        self.server = server
        self.cookie = ""
        parts = urlsplit(server.link())
        _, headers, _ = self.get(f"/?{parts.query}")
        self.cookie = headers["set-cookie"].split(";", 1)[0]

    def request(self, method: str, path: str, body: str = "") -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        headers = {"Host": self.server.host, "Cookie": self.cookie}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body.encode(), headers=headers)
            response = connection.getresponse()
            text = response.read().decode()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        finally:
            connection.close()

    def get(self, path: str) -> tuple[int, dict[str, str], str]:
        return self.request("GET", path)


@pytest.fixture
def pail(s3_server: LocalS3, bucket: str) -> Pail:
    return Pail.connect(bucket, max_retries=0, **s3_server.connect_kwargs())  # type: ignore[arg-type]


@pytest.fixture
def server(pail: Pail) -> Iterator[DashboardServer]:
    with DashboardServer(Dashboard(pail.store, interval=1.0)) as running:
        yield running


def _dead_letter(pail: Pail, **changes: Any) -> str:
    """A real dead letter, then rewritten by a foreign writer with ``changes`` to its error."""
    job_id = pail.enqueue({"report": "big"})

    def fail(payload: Any) -> None:
        raise RuntimeError("boom")

    assert pail.work_once(fail)
    key = pail.keys.dlq(job_id)
    record = json.loads(pail.store.get(key).body)  # type: ignore[union-attr]
    record["error"].update(changes)
    pail.store.put(key, json.dumps(record).encode())
    return job_id


def test_given_a_dead_letter_over_the_read_cap_when_viewed_then_its_size_shows_and_one_get_is_spent(
    server: DashboardServer, pail: Pail
) -> None:
    job_id = _dead_letter(pail, traceback="T<" * (4 * 1024 * 1024))  # 8 MB, as in the issue
    size = pail.store.head(pail.keys.dlq(job_id)).size  # type: ignore[union-attr]
    browser = Browser(server)
    browser.get("/q/_/dlq")  # the queue's Pail is made (its layout marker read) once
    before = dict(server.board.meter.last_minute())

    status, _, letter = browser.get(f"/q/_/dlq/{job_id}")

    spent = dict(server.board.meter.last_minute())
    assert status == 200 and len(letter) < PAGE_LIMIT
    assert f"{size:,} bytes, more than the dashboard reads ({MAX_READ:,})" in letter
    assert spent.get("GET", 0) - before.get("GET", 0) == 1  # the body was not fetched twice
    assert spent.get("HEAD", 0) == before.get("HEAD", 0)  # and no HEAD first

    status, _, job = browser.get(f"/q/_/job/{job_id}")

    assert status == 200 and len(job) < PAGE_LIMIT and 'id="too-large"' in job


def test_given_a_dead_letter_over_the_read_cap_when_redriven_then_the_job_is_pending_again(
    server: DashboardServer, pail: Pail
) -> None:
    job_id = _dead_letter(pail, traceback="T" * (5 * 1024 * 1024))
    browser = Browser(server)
    _, _, letter = browser.get(f"/q/_/dlq/{job_id}")
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', letter).group(1)  # type: ignore[union-attr]

    status, headers, _ = browser.request("POST", f"/q/_/dlq/{job_id}/redrive", f"csrf={csrf}")

    assert status == 303 and "notice=redriven" in headers["location"]
    assert pail.status(job_id).state is JobState.PENDING  # type: ignore[union-attr]


def test_given_values_under_the_read_cap_but_long_when_shown_then_each_is_cut_with_a_note(
    server: DashboardServer, pail: Pail
) -> None:
    job_id = _dead_letter(pail, traceback="<" * (2 * 1024 * 1024), message="<" * (512 * 1024))
    browser = Browser(server)

    pages = [browser.get(f"/q/_/dlq/{job_id}"), browser.get(f"/q/_/job/{job_id}")]

    for status, _, page in pages:
        assert status == 200 and len(page) < PAGE_LIMIT
        assert f"{2 * 1024 * 1024 - MAX_SHOWN:,} more characters not shown" in page
        assert f"{512 * 1024 - MAX_SHOWN:,} more characters not shown" in page


def test_given_a_pending_job_over_the_read_cap_when_its_state_is_listed_then_it_says_too_large(
    server: DashboardServer, pail: Pail
) -> None:
    pail.store.put(pail.keys.queue("01JD8X3W5K9T2B7Q4R6M0N1P2S"), b"[" + b"0," * MAX_READ + b"0]")

    status, _, page = Browser(server).get("/q/_/jobs?state=pending")

    assert status == 200 and len(page) < PAGE_LIMIT and "too large to read here" in page


def test_given_a_store_without_bounded_gets_when_read_with_a_cap_then_a_head_comes_first() -> None:
    inner = MemoryStore("jobs")
    inner.put("big", b"x" * 11)
    inner.put("small", b"x" * 10)
    meter = RequestMeter()
    store = MeteredStore(PlainStore(inner), meter, max_read=10)

    small = store.get("small")
    with pytest.raises(ObjectTooLargeError) as refused:
        store.get("big")

    assert small is not None and small.body == b"x" * 10
    assert refused.value.size == 11 and store.get("missing") is None
    assert dict(meter.last_minute()) == {"HEAD": 3, "GET": 1}


def test_given_big_pending_jobs_when_read_then_the_dashboard_keeps_no_payload_and_a_short_error() -> (
    None
):
    # 40 pending jobs of 3 MB each grew the dashboard by 132 MB (kept in its read cache); now 0.
    store = MemoryStore("jobs")
    pail = Pail(store, max_retries=3)
    job_id = pail.enqueue({"blob": "P" * 100_000})

    def fail(payload: Any) -> None:
        raise RuntimeError("boom")

    assert pail.work_once(fail)  # pending again, with its last error
    key = pail.keys.queue(job_id)
    envelope = json.loads(store.get(key).body)  # type: ignore[union-attr]
    envelope["last_error"]["message"] = "<" * 100_000  # a foreign writer's
    store.put(key, json.dumps(envelope).encode())
    board = Dashboard(store)
    info = store.head(key)
    assert info is not None

    detail = board.reader.detail(pail.keys, info, "queue/")
    again = board.reader.detail(pail.keys, info, "queue/")

    assert detail is not None and again is detail  # cached
    assert detail.payload is None  # no list shows it; the letter and job pages read their own
    assert detail.error is not None and len(detail.error.message) == MESSAGE_LIMIT
