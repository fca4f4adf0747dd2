"""The job status page: a static HTML file that polls the bucket, and a tiny localhost server.

The page (``pail/static/status.html``, which
``examples/status-page/index.html`` links to) reads a job's four presigned status URLs
from its fragment and polls them straight from the browser: no backend in
the loop. ``docs/status-page.md`` documents the JSON it reads.

The bucket's CORS rule must allow GET from the page's origin
(``cors_rule``). pail's embedded local server answers CORS for pages served
on this machine (GET and HEAD: ``pail.local.CorsPolicy``), so the page
served here works against it as is.

``serve_status_page`` is what ``pail url BUCKET ID --page`` and ``pail demo
--open-status`` use::

    url, stop = serve_status_page(pail, job_id)
    print(f"status page: {url}")
    ...
    stop()
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from pail.bounds import validate_seconds
from pail.codec import OUTCOME_HEADER
from pail.serving import BackgroundServer, QuietThreadingServer

if TYPE_CHECKING:
    from mypy_boto3_s3.type_defs import CORSRuleTypeDef

    from pail.queue import Pail

LOOPBACK = "127.0.0.1"
STATES: tuple[str, ...] = ("pending", "running", "done", "failed")
"""The keys of ``Pail.status_urls``, in the order the page reads them."""
OPTIONAL_STATES: tuple[str, ...] = ("delayed", "waiting")
"""Keys ``Pail.status_urls`` adds when they apply: a delayed job's entry while it waits, and a
job's waiting record while it waits for its dependencies."""
EXPOSED_HEADERS: tuple[str, ...] = ("ETag", OUTCOME_HEADER)
"""Response headers the page reads across origins: the outcome tells cancelled from dead."""

PAGE_PATHS = frozenset({"/", "/index.html", "/status.html"})
ANY_ENDPOINT = "http: https:"
"""``connect-src`` when the endpoint is not known: any http(s) origin, nothing else."""
_INLINE = re.compile(rb"<(script|style)>(.*?)</\1>", re.DOTALL)


def page_html() -> bytes:
    """The status page's HTML, shipped as package data (``pail/static/status.html``)."""
    return resources.files("pail").joinpath("static", "status.html").read_bytes()


def endpoint_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of a presigned URL (what ``connect-src`` must allow), or None.

    >>> endpoint_origin("https://jobs.s3.eu-west-1.amazonaws.com/queue/J1?X-Amz-Signature=1")
    'https://jobs.s3.eu-west-1.amazonaws.com'
    >>> endpoint_origin("memory://jobs/queue/J1") is None
    True
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


@functools.lru_cache(maxsize=8)  # the page is one file: hash it once, not per request
def page_csp(html: bytes, connect_src: str = ANY_ENDPOINT) -> str:
    """The page's Content-Security-Policy: its own inline script and style by hash, nothing else.

    The page reads presigned URLs from its fragment, so what it may fetch is
    bounded here too: ``connect_src`` (an origin, or the default, any
    http(s) origin). It cannot be framed, submit a form, or load anything.

    >>> policy = page_csp(b"<style>p{}</style><script>go()</script>", "https://s3.example")
    >>> "script-src 'sha256-" in policy, "connect-src https://s3.example;" in policy
    (True, True)
    """
    hashes: dict[bytes, list[str]] = {b"script": [], b"style": []}
    for match in _INLINE.finditer(html):
        digest = base64.b64encode(hashlib.sha256(match.group(2)).digest()).decode()
        hashes[match.group(1)].append(f"'sha256-{digest}'")
    scripts = " ".join(hashes[b"script"]) or "'none'"
    styles = " ".join(hashes[b"style"]) or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src {styles}; "
        f"connect-src {connect_src}; img-src 'none'; form-action 'none'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


def page_fragment(
    job_id: str,
    urls: Mapping[str, str],
    *,
    interval: float | None = None,
    max_interval: float | None = None,
) -> str:
    """The page's parameters, URL-encoded: the job id, its four status URLs, the poll delays.

    ``interval`` is the first delay between polls in seconds (the page's
    default is 1) and ``max_interval`` the ceiling its backoff grows to
    (default 10).

    >>> page_fragment("J1", {s: f"http://s3/{s}/J1?X=1" for s in STATES})[:35]
    'id=J1&pending=http%3A%2F%2Fs3%2Fpen'
    """
    missing = [state for state in STATES if state not in urls]
    if missing:
        raise ValueError(f"status URLs are missing {', '.join(missing)}")
    for name, seconds in (("interval", interval), ("max_interval", max_interval)):
        if seconds is not None:
            validate_seconds(name, seconds, above_minimum=True)
    params: list[tuple[str, str]] = [("id", job_id)]
    params += [(state, urls[state]) for state in (*STATES, *OPTIONAL_STATES) if state in urls]
    if interval is not None:
        params.append(("interval", f"{interval:g}"))
    if max_interval is not None:
        params.append(("max_interval", f"{max_interval:g}"))
    return urlencode(params)


def status_page_url(
    page: str,
    job_id: str,
    urls: Mapping[str, str],
    *,
    interval: float | None = None,
    max_interval: float | None = None,
) -> str:
    """A link to the page at ``page`` that shows one job.

    The presigned URLs go in the fragment (after ``#``), which the browser
    never sends to the page's own host, so they stay out of its logs and
    out of Referer headers. The page also accepts them in the query string.

    >>> status_page_url("http://127.0.0.1:8000/", "J1", {s: "http://s3/x" for s in STATES})
    'http://127.0.0.1:8000/#id=J1&pending=http%3A%2F%2Fs3%2Fx&running=http%3A%2F%2Fs3%2Fx&done=http%3A%2F%2Fs3%2Fx&failed=http%3A%2F%2Fs3%2Fx'
    """
    fragment = page_fragment(job_id, urls, interval=interval, max_interval=max_interval)
    return f"{page.split('#', 1)[0]}#{fragment}"


def cors_rule(origins: Iterable[str], *, max_age_seconds: int = 300) -> CORSRuleTypeDef:
    """The S3 CORS rule the page needs: GET and HEAD from ``origins``.

    It is the rule the ``PailQueue`` construct adds (``cors_allowed_origins``).

    The page's requests are simple GETs (no custom headers), so browsers do
    not preflight them; the rule answers preflights all the same::

        client.put_bucket_cors(
            Bucket=bucket, CORSConfiguration={"CORSRules": [cors_rule(["https://app.example"])]}
        )
    """
    allowed = list(origins)
    if not allowed:
        raise ValueError("a CORS rule needs at least one origin")
    return {
        "AllowedMethods": ["GET", "HEAD"],
        "AllowedOrigins": allowed,
        "ExposeHeaders": list(EXPOSED_HEADERS),
        "MaxAgeSeconds": max_age_seconds,
    }


class _PageHandler(BaseHTTPRequestHandler):
    server: _PageHTTPServer

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path not in PAGE_PATHS:
            self.send_error(404)
            return
        body = self.server.html
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", self.server.csp)
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the demo's terminal is for the demo."""


class _PageHTTPServer(QuietThreadingServer):
    def __init__(self, address: tuple[str, int], html: bytes, connect_src: str) -> None:
        super().__init__(address, _PageHandler)
        self.html = html
        self.csp = page_csp(html, connect_src)


class StatusPageServer(BackgroundServer[_PageHTTPServer]):
    """Serves the status page on ``host`` (loopback by default) from a background thread.

    The page goes out with ``page_csp``: its own inline script and style
    only, and fetches to ``connect_src`` (the bucket's endpoint origin, when
    known; ``serve_status_page`` knows it).

    >>> with StatusPageServer() as server:  # doctest: +SKIP
    ...     print(server.url)
    http://127.0.0.1:53124/
    """

    def __init__(
        self,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        html: bytes | None = None,
        connect_src: str = ANY_ENDPOINT,
    ) -> None:
        super().__init__("pail-status-page")
        self._host = host
        self._port = port
        self._html = page_html() if html is None else html
        self._connect_src = connect_src

    def bind(self) -> _PageHTTPServer:
        return _PageHTTPServer((self._host, self._port), self._html, self._connect_src)

    @property
    def origin(self) -> str:
        """``http://host:port``: what the bucket's CORS rule must allow."""
        return super().origin

    @property
    def url(self) -> str:
        """The page's address (add a fragment with ``status_page_url``)."""
        return f"{self.origin}/"


def serve_status_page(
    pail: Pail,
    job_id: str,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    expires_in: int = 3600,
    interval: float | None = None,
    max_interval: float | None = None,
) -> tuple[str, Callable[[], None]]:
    """Serve the page on localhost and return ``(url, stop)``: the link to one job, and a stopper.

    The link carries presigned URLs valid ``expires_in`` seconds. Once loaded,
    the page talks to the bucket only, but keep the server up while people
    may still open or reload the link; call ``stop()`` when done.
    ``interval`` and ``max_interval`` set the page's polling (``page_fragment``).

    >>> url, stop = serve_status_page(pail, job_id)  # doctest: +SKIP
    >>> webbrowser.open(url)                          # doctest: +SKIP
    >>> stop()                                        # doctest: +SKIP
    """
    urls = pail.status_urls(job_id, expires_in)
    endpoint = endpoint_origin(urls["pending"])
    server = StatusPageServer(
        host=host, port=port, connect_src=endpoint if endpoint is not None else ANY_ENDPOINT
    ).start()
    link = status_page_url(server.url, job_id, urls, interval=interval, max_interval=max_interval)
    return link, server.stop
