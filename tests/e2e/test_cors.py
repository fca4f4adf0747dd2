"""Which local server honours the bucket's CORS rule: the reason the browser tests use SeaweedFS.

The page needs, for its own origin, ``Access-Control-Allow-Origin`` on every
answer it must read (200, the 404 that means "not in this state" and the 403
of an expired link), and nothing for an origin the rule does not allow.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

import pytest

from pail import Pail
from pail.local import LocalS3
from pail.status_page import cors_rule
from tests.servers import SeaweedS3, make_s3_client
from tests.support.queues import connect_to, make_client

pytestmark = pytest.mark.s3

PAGE = "http://127.0.0.1:8123"
OTHER = "http://127.0.0.1:8124"


def cors_answer(url: str, origin: str, method: str = "GET") -> tuple[int, str | None]:
    """The status and ``Access-Control-Allow-Origin`` a browser at ``origin`` would get."""
    headers = {"Origin": origin}
    if method == "OPTIONS":
        headers["Access-Control-Request-Method"] = "GET"
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Access-Control-Allow-Origin")


def ruled_bucket(client_kwargs: Mapping[str, str], name: str) -> Pail:
    client = make_s3_client(client_kwargs)
    client.create_bucket(Bucket=name)
    client.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [cors_rule([PAGE])]})
    return connect_to(client_kwargs, name)


def test_given_the_page_rule_on_seaweedfs_then_only_the_page_origin_may_read(
    seaweed_server: SeaweedS3,
) -> None:
    pail = ruled_bucket(seaweed_server.connect_kwargs(), "cors-rule-seaweed")
    urls = pail.status_urls(pail.enqueue({"n": 1}), 60)
    assert cors_answer(urls["pending"], PAGE) == (200, PAGE)
    assert cors_answer(urls["done"], PAGE) == (404, PAGE)
    assert cors_answer(urls["pending"], PAGE, "OPTIONS") == (200, PAGE)
    assert cors_answer(urls["pending"], OTHER) == (200, None)
    assert cors_answer(urls["done"], OTHER) == (404, None)
    assert cors_answer(urls["pending"], OTHER, "OPTIONS")[1] is None


def test_given_the_page_rule_on_the_embedded_server_then_any_page_of_this_machine_reads(
    s3_server: LocalS3, bucket: str
) -> None:
    """moto ignores the rule; ``pail.local`` answers CORS itself: loopback pages, GET and HEAD."""
    make_client(s3_server).put_bucket_cors(
        Bucket=bucket, CORSConfiguration={"CORSRules": [cors_rule([PAGE])]}
    )
    pail = connect_to(s3_server.connect_kwargs(), bucket)
    urls = pail.status_urls(pail.enqueue({"n": 1}), 60)
    assert cors_answer(urls["pending"], PAGE) == (200, PAGE)
    assert cors_answer(urls["pending"], OTHER) == (200, OTHER)
    assert cors_answer(urls["done"], OTHER) == (404, OTHER)
    assert cors_answer(urls["pending"], "https://elsewhere.example") == (403, None)
