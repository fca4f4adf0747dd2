"""The page's Python side, without a browser: the shipped copy, the server, the links."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest

from pail.local import LocalS3
from pail.status_page import (
    STATES,
    StatusPageServer,
    cors_rule,
    page_html,
    serve_status_page,
    status_page_url,
)
from tests.e2e.conftest import EXAMPLE_PAGE
from tests.support.queues import connect_to, make_client

JOB = "01JD8X3W5K9T2B7Q4R6M0N1P2S"


def test_given_the_example_page_then_it_is_the_packaged_page() -> None:
    # examples/status-page/index.html is a symlink to the package's copy, so
    # the page exists once; this guards against the link being replaced.
    assert EXAMPLE_PAGE.is_symlink()
    assert page_html() == EXAMPLE_PAGE.read_bytes()


def test_given_a_running_server_when_the_page_is_requested_then_it_is_served_as_html() -> None:
    with StatusPageServer(html=b"<!doctype html><p>page</p>") as server:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url + "?ignored=1", timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
            assert response.headers["Referrer-Policy"] == "no-referrer"
            assert response.read() == b"<!doctype html><p>page</p>"
        head = urllib.request.Request(server.origin + "/status.html", method="HEAD")
        with urllib.request.urlopen(head, timeout=5) as response:
            assert response.status == 200
            assert response.read() == b""
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.origin + "/../etc/passwd", timeout=5)
        assert missing.value.code == 404


def test_given_a_stopped_server_then_it_no_longer_answers() -> None:
    server = StatusPageServer().start()
    url = server.url
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)
    with pytest.raises(RuntimeError):
        _ = server.url


def test_given_status_urls_when_building_the_link_then_the_fragment_carries_them_all() -> None:
    urls = {
        state: f"http://127.0.0.1:9000/b/{state}/{JOB}?X-Amz-Signature=a%2Bb&x=1"
        for state in STATES
    }
    link = status_page_url("http://127.0.0.1:8000/#old", JOB, urls, interval=0.5, max_interval=4)
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path, parts.query) == (
        "http",
        "127.0.0.1:8000",
        "/",
        "",
    )
    params = {name: values[0] for name, values in parse_qs(parts.fragment).items()}
    assert params == {"id": JOB, **urls, "interval": "0.5", "max_interval": "4"}


def test_given_a_missing_state_when_building_the_link_then_it_is_refused() -> None:
    urls = {state: "http://s3/x" for state in STATES if state != "failed"}
    with pytest.raises(ValueError, match="failed"):
        status_page_url("http://127.0.0.1:8000/", JOB, urls)


def test_given_the_page_cors_rule_when_put_on_a_bucket_then_the_server_accepts_it(
    s3_server: LocalS3, bucket: str
) -> None:
    client = make_client(s3_server)
    client.put_bucket_cors(
        Bucket=bucket, CORSConfiguration={"CORSRules": [cors_rule(["http://127.0.0.1:8000"])]}
    )
    (rule,) = client.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert rule["AllowedOrigins"] == ["http://127.0.0.1:8000"]
    assert sorted(rule["AllowedMethods"]) == ["GET", "HEAD"]
    with pytest.raises(ValueError):
        cors_rule([])


@pytest.mark.s3
def test_given_a_job_when_serving_its_page_then_the_link_reads_the_job_from_the_bucket(
    s3_server: LocalS3, bucket: str
) -> None:
    pail = connect_to(s3_server.connect_kwargs(), bucket)
    job_id = pail.enqueue({"n": 1})
    url, stop = serve_status_page(pail, job_id, expires_in=120)
    try:
        parts = urlsplit(url)
        with urllib.request.urlopen(f"{parts.scheme}://{parts.netloc}/", timeout=5) as page:
            assert page.read() == page_html()
        params = {name: values[0] for name, values in parse_qs(parts.fragment).items()}
        assert params["id"] == job_id
        with urllib.request.urlopen(params["pending"], timeout=5) as pending:
            assert json.loads(pending.read())["payload"] == {"n": 1}
        with pytest.raises(urllib.error.HTTPError) as running:
            urllib.request.urlopen(params["running"], timeout=5)
        assert running.value.code == 404
    finally:
        stop()
