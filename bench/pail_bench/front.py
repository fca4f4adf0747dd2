"""A local S3 front: an HTTP relay on 127.0.0.1 that delays or throttles each request by policy.

The benchmark puts one in front of the local S3 server to make the network
and the service look like AWS in one respect at a time:

* ``FixedDelay``: every request takes ``d`` longer, half on the way in and
  half on the way out, as a round trip to a distant server would. Both
  queues meet the same delay whatever client they build, because it sits on
  the wire, not in a client hook.
* ``pail_bench.partitions.PartitionPolicy``: S3's per-partition request
  rates, answered with ``503 SlowDown`` when a partition is over its rate.

Each client connection carries one request (``Connection: close`` both
ways), so the front never has to parse a response: it relays bytes until
the server closes. The delay is applied per request, so it models a client
that keeps its connections alive: a new TCP or TLS handshake costs nothing
extra here. The front binds 127.0.0.1 only and forwards only to its one
upstream. It imports only the standard library.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

LOOPBACK = "127.0.0.1"
_MAX_LINE = 65536
_BACKLOG = 256
"""Pending connections the listening socket holds: 16 workers open one per request."""
_SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
READ_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class S3Request:
    """What a policy needs to know about one path-style S3 request.

    ``key`` is the object key, or for a LIST the key the listing starts at
    (its ``start-after`` or ``prefix``), or None for a bucket-level request
    (CreateBucket, a LIST of the whole bucket).

    >>> S3Request.parse("GET", "/jobs/queue/01J?x-id=GetObject")
    S3Request(method='GET', bucket='jobs', key='queue/01J', is_list=False)
    >>> S3Request.parse("GET", "/jobs?list-type=2&prefix=queue%2F").key
    'queue/'
    """

    method: str
    bucket: str
    key: str | None
    is_list: bool

    @property
    def is_read(self) -> bool:
        """GET, HEAD and LIST read; PUT, POST and DELETE write."""
        return self.method in READ_METHODS

    @classmethod
    def parse(cls, method: str, target: str) -> S3Request:
        parts = urlsplit(target)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        if key:
            return cls(method, unquote(bucket), unquote(key), is_list=False)
        query = parse_qs(parts.query, keep_blank_values=True)
        if method == "GET" and ("list-type" in query or "prefix" in query):
            start = max(query.get("prefix", [""])[0], query.get("start-after", [""])[0])
            return cls(method, unquote(bucket), start or None, is_list=True)
        return cls(method, unquote(bucket), None, is_list=False)


@dataclass(frozen=True, slots=True)
class Decision:
    """Forward the request after ``before`` seconds and answer ``after`` seconds later, or throttle it."""

    throttle: bool = False
    before: float = 0.0
    after: float = 0.0


FORWARD = Decision()


class Policy(Protocol):
    """Decides, for each request, how the front treats it. Called from many threads at once."""

    def decide(self, request: S3Request) -> Decision: ...


class FixedDelay:
    """Every request takes ``seconds`` longer: half before it reaches the server, half after.

    >>> FixedDelay(0.02).decide(S3Request.parse("HEAD", "/b/k"))
    Decision(throttle=False, before=0.01, after=0.01)
    """

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a delay cannot be negative, got {seconds}")
        self._decision = Decision(before=seconds / 2, after=seconds / 2)

    def decide(self, request: S3Request) -> Decision:
        return self._decision


class Front:
    """``with Front(upstream_port, policy) as front:`` then point clients at ``front.endpoint_url``."""

    def __init__(self, upstream_port: int, policy: Policy) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.policy = policy
        self.counts: Counter[str] = Counter()
        self.delayed_seconds = 0.0
        """The delay actually applied, summed: a loaded machine oversleeps."""
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start the front first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> Front:
        front = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                front._relay(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = _BACKLOG

        self._server = Server((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-front", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self) -> Front:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def totals(self) -> tuple[int, float]:
        """Requests forwarded so far, and the delay actually applied to them, in seconds."""
        with self._lock:
            return self.counts["forwarded"], self.delayed_seconds

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _relay(self, client: socket.socket) -> None:
        try:
            read = _read_request(client)
        except (OSError, ValueError):
            self._count("unreadable")
            return
        if read is None:
            return
        request, raw = read
        decision = self.policy.decide(request)
        try:
            if decision.throttle:
                self._count("throttled")
                client.sendall(_slowdown_response())
                return
            waited = _hold(decision.before)
            response = _forward(self.upstream, raw)
            waited += _hold(decision.after)
            with self._lock:  # counted before the client can see the answer
                self.counts["forwarded"] += 1
                self.delayed_seconds += waited
            client.sendall(response)
        except OSError:
            self._count("relay-errors")
        finally:
            client.close()


def _hold(seconds: float) -> float:
    """Hold the request for ``seconds`` (the modelled network: the wait is the point); how long it took."""
    if seconds <= 0:
        return 0.0
    started = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - started


def _forward(upstream: tuple[str, int], request: bytes) -> bytes:
    with socket.create_connection(upstream, timeout=60) as sock:
        sock.sendall(request)
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _slowdown_response() -> bytes:
    head = (
        "HTTP/1.1 503 Slow Down\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(_SLOWDOWN_BODY)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + _SLOWDOWN_BODY


def _read_request(client: socket.socket) -> tuple[S3Request, bytes] | None:
    """One HTTP/1.1 request, parsed and re-framed with ``Connection: close``; None on hang-up."""
    stream: BinaryIO = client.makefile("rb")
    line = stream.readline(_MAX_LINE)
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: list[bytes] = []
    length = 0
    chunked = False
    while True:
        header = stream.readline(_MAX_LINE)
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.partition(b":")
        lowered = name.strip().lower()
        if lowered == b"connection":
            continue
        if lowered == b"content-length":
            length = int(value.strip())
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        if lowered == b"expect":
            # botocore asks before it sends a PUT body; answer for the server.
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            continue
        headers.append(header)
    body = _read_chunked(stream) if chunked else stream.read(length) if length else b""
    raw = line + b"".join(headers) + b"Connection: close\r\n\r\n" + body
    return S3Request.parse(method, target), raw


def _read_chunked(stream: BinaryIO) -> bytes:
    """A chunked body, kept in its chunked framing (trailers included) to pass on as is."""
    parts: list[bytes] = []
    while True:
        size_line = stream.readline(_MAX_LINE)
        parts.append(size_line)
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while True:
                trailer = stream.readline(_MAX_LINE)
                parts.append(trailer)
                if trailer in (b"\r\n", b"\n", b""):
                    return b"".join(parts)
        parts.append(stream.read(size + 2))
