"""``pail server``'s answers to browser pages: GET and HEAD from this machine, nothing that writes.

The embedded server checks no signature, and moto answered CORS for any
origin with PUT and DELETE: any web page the operator visited could write
and delete the local bucket's objects. Only browsers send ``Origin``; every
request here carries one, as a page's would, against the real server over
HTTP. Requests without it (the SDK, the whole rest of the suite) are S3 as is.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pytest

from pail.codec import OUTCOME_HEADER
from pail.errors import ConfigurationError
from pail.local import CorsPolicy, LocalS3, is_loopback_origin
from tests.servers import make_s3_client
from tests.support.command import LineReader, Spawn, pail_script, process_env
from tests.support.queues import local_kwargs, make_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PAGE = "http://127.0.0.1:8123"  # a page served on this machine (the status page's kind)
FOREIGN = "https://attacker.example"  # any web page the operator happens to visit


def ask(
    url: str, method: str, headers: Mapping[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str]]:
    """The status and headers a browser would get (urllib raises on 4xx; that is an answer too)."""
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def preflight(url: str, origin: str, method: str) -> tuple[int, dict[str, str]]:
    return ask(url, "OPTIONS", {"Origin": origin, "Access-Control-Request-Method": method})


@pytest.fixture
def stored(s3_server: LocalS3, bucket: str) -> str:
    """The URL of an object that exists in this test's bucket."""
    make_client(s3_server).put_object(Bucket=bucket, Key="queue/x", Body=b'{"n": 1}')
    return f"{s3_server.endpoint_url}/{bucket}/queue/x"


def presigned(client: S3Client, bucket: str, key: str) -> str:
    """A presigned GET, as the status page is given (moto refuses an anonymous GET)."""
    return client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60
    )


def exists(s3_server: LocalS3, bucket: str, key: str) -> bool:
    listed = make_client(s3_server).list_objects_v2(Bucket=bucket, Prefix=key)
    return listed.get("KeyCount", 0) == 1


@pytest.mark.parametrize("origin", [FOREIGN, PAGE])
@pytest.mark.parametrize("method", ["PUT", "DELETE", "POST"])
def test_given_any_page_when_it_preflights_a_write_then_it_is_refused_without_cors(
    stored: str, origin: str, method: str
) -> None:
    status, headers = preflight(stored, origin, method)

    assert status == 403
    assert not any(name.lower().startswith("access-control-") for name in headers)


@pytest.mark.parametrize("origin", [FOREIGN, PAGE])
def test_given_a_page_when_it_sends_put_or_delete_anyway_then_nothing_changes(
    s3_server: LocalS3, bucket: str, stored: str, origin: str
) -> None:
    put = ask(f"{s3_server.endpoint_url}/{bucket}/queue/planted", "PUT", {"Origin": origin}, b"{}")
    delete = ask(stored, "DELETE", {"Origin": origin})

    assert (put[0], delete[0]) == (403, 403)
    assert not exists(s3_server, bucket, "queue/planted")
    assert exists(s3_server, bucket, "queue/x")


def test_given_a_foreign_page_when_it_posts_a_delete_without_preflight_then_nothing_is_deleted(
    s3_server: LocalS3, bucket: str, stored: str
) -> None:
    # A form's POST (or fetch with mode "no-cors") is sent without asking first.
    body = b"<Delete><Object><Key>queue/x</Key></Object><Quiet>true</Quiet></Delete>"
    status, _ = ask(
        f"{s3_server.endpoint_url}/{bucket}?delete",
        "POST",
        {"Origin": FOREIGN, "Content-Type": "text/plain"},
        body,
    )

    assert status == 403
    assert exists(s3_server, bucket, "queue/x")


def test_given_a_page_on_this_machine_when_it_reads_then_it_may_and_sees_the_outcome_header(
    s3_server: LocalS3, bucket: str, stored: str
) -> None:
    url = presigned(make_client(s3_server), bucket, "queue/x")
    status, headers = ask(url, "GET", {"Origin": PAGE})
    head, _ = ask(url, "HEAD", {"Origin": PAGE})  # moto checks no signature, only that one is there
    asked, allowed = preflight(url, PAGE, "GET")

    assert (status, head, asked) == (200, 200, 200)
    assert headers["Access-Control-Allow-Origin"] == PAGE
    assert OUTCOME_HEADER in headers["Access-Control-Expose-Headers"]
    assert allowed["Access-Control-Allow-Origin"] == PAGE
    assert allowed["Access-Control-Allow-Methods"] == "GET, HEAD"


def test_given_a_foreign_page_when_it_reads_then_it_is_refused(
    s3_server: LocalS3, bucket: str, stored: str
) -> None:
    url = presigned(make_client(s3_server), bucket, "queue/x")
    status, headers = ask(url, "GET", {"Origin": FOREIGN})
    asked, allowed = preflight(url, FOREIGN, "GET")

    assert (status, asked) == (403, 403)
    assert "Access-Control-Allow-Origin" not in headers | allowed


@pytest.fixture
def writable_server(spawn: Spawn) -> Iterator[str]:
    """``pail server --cors-method PUT --cors-origin '*'``: more, because it was asked for."""
    asked_for = ["--cors-method", "put", "--cors-origin", "*"]
    process = spawn(
        [pail_script(), "server", "--port", "0", "--bucket", "open", *asked_for], process_env({})
    )
    stdout = LineReader(process.stdout)  # type: ignore[arg-type]
    endpoint = stdout.wait_for("listening on").split()[-1]
    stdout.wait_for("created bucket s3://open")
    yield endpoint


def test_given_put_and_any_origin_asked_for_when_a_page_writes_then_it_may(
    writable_server: str,
) -> None:
    url = f"{writable_server}/open/queue/from-a-page"
    asked, allowed = preflight(url, FOREIGN, "PUT")
    put, headers = ask(url, "PUT", {"Origin": FOREIGN}, b"{}")
    client = make_s3_client(local_kwargs(writable_server))
    read, _ = ask(presigned(client, "open", "queue/from-a-page"), "GET", {"Origin": FOREIGN})
    delete, _ = ask(url, "DELETE", {"Origin": FOREIGN})  # not asked for

    assert (asked, put, read, delete) == (200, 200, 200, 403)
    assert allowed["Access-Control-Allow-Methods"] == "GET, HEAD, PUT"
    assert headers["Access-Control-Allow-Origin"] == FOREIGN


def test_given_an_unknown_method_when_a_policy_is_made_then_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="CORS method PATCH is not one of"):
        CorsPolicy.of(["PATCH"])


@pytest.mark.parametrize(
    ("origin", "loopback"),
    [
        ("http://127.0.0.1:8123", True),
        ("http://localhost:3000", True),
        ("http://[::1]:8080", True),
        ("http://k3j2.localhost:9000", True),
        ("https://127.0.0.1", True),
        ("null", False),  # a file:// page, or a sandboxed frame of any site
        ("http://127.0.0.1.attacker.example", False),
        ("http://localhost.attacker.example", False),
        ("ftp://127.0.0.1", False),
        ("http://127.0.0.1:99999", False),
    ],
)
def test_given_an_origin_when_judged_then_only_pages_of_this_machine_are_loopback(
    origin: str, loopback: bool
) -> None:
    assert is_loopback_origin(origin) is loopback


def test_given_a_name_rebound_to_loopback_when_a_page_reads_same_origin_then_refused(
    s3_server: LocalS3, bucket: str, stored: str
) -> None:
    # DNS rebinding: the attacker's own name now resolves to 127.0.0.1, so its
    # page's requests are same-origin, and a same-origin GET carries no Origin.
    rebound = {"Host": f"rebound.attacker.example:{s3_server.port}"}
    url = presigned(make_client(s3_server), bucket, "queue/x")

    read, _ = ask(url, "GET", rebound)
    listing, _ = ask(f"{s3_server.endpoint_url}/{bucket}", "GET", rebound)
    planted, _ = ask(f"{s3_server.endpoint_url}/{bucket}/queue/planted", "PUT", rebound, b"{}")

    assert (read, listing, planted) == (403, 403, 403)
    assert not exists(s3_server, bucket, "queue/planted")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_given_a_name_of_this_machine_when_addressed_then_answered(
    s3_server: LocalS3, bucket: str, stored: str, host: str
) -> None:
    url = presigned(make_client(s3_server), bucket, "queue/x")

    status, _ = ask(url, "GET", {"Host": f"{host}:{s3_server.port}"})

    assert status == 200
