"""The relay core of the tests' proxies: HTTP between S3 clients and one S3 server on loopback.

A ``Relay`` accepts connections on 127.0.0.1, reads one request from each,
and hands it to ``handle`` as an ``Exchange``; a proxy is a ``Relay`` whose
``handle`` is its policy:

* ``tests.support.scripted_proxy.ScriptedProxy``: what the test's script says, request by request;
* ``tests.chaos.proxy.FaultProxy``: random faults at a given rate;
* ``tests.support.refusing_proxy.RefusingProxy``: a server without conditional deletes.

The default ``handle`` forwards the request and relays the answer. Each
client connection carries one request (``Connection: close`` both ways), so
a response is relayed byte for byte, never parsed. A relay binds 127.0.0.1
only and forwards only to its one upstream port. It imports only the standard
library. (``bench/pail_bench/front.py`` frames requests the same way; the
benchmark runs from ``bench/`` and keeps its own copy rather than import the
test tree on its timed path.)
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from collections import Counter
from dataclasses import dataclass, replace
from types import TracebackType
from typing import BinaryIO, Self
from urllib.parse import unquote

LOOPBACK = "127.0.0.1"
_MAX_LINE = 65536
_UPSTREAM_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Request:
    """One S3 request as a policy sees it: ``method``, object ``key`` (path-style), ``query``, ``body``.

    ``key`` and ``query`` are unquoted; ``headers`` are as sent, less ``Connection``
    and ``Expect`` (the relay answers ``100 Continue`` itself).

    >>> request = Request.parse(b"GET /jobs?list-type=2&prefix=queue%2F HTTP/1.1\\r\\n")
    >>> request.key, request.is_("LIST", "queue/")
    ('', True)
    """

    method: str
    key: str
    query: str
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    target: str = "/"
    version: str = "HTTP/1.1"

    @classmethod
    def parse(
        cls, line: bytes, headers: tuple[tuple[str, str], ...] = (), body: bytes = b""
    ) -> Request:
        """The request whose request line is ``line``."""
        method, target, version = line.decode("latin-1").strip().split(" ", 2)
        path, _, query = target.partition("?")
        # Path-style addressing: /{bucket}/{key}.
        key = unquote(path.lstrip("/").partition("/")[2])
        return cls(method, key, unquote(query), body, headers, target, version)

    def is_(self, method: str, prefix: str) -> bool:
        """True for ``method`` on a key under ``prefix`` (a LIST is a GET with the prefix in its query)."""
        if method == "LIST":
            return self.method == "GET" and "list-type=2" in self.query and prefix in self.query
        return self.method == method and self.key.startswith(prefix)

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    def without_header(self, name: str) -> Request:
        """This request less header ``name`` (any case)."""
        wanted = name.lower()
        return replace(self, headers=tuple(h for h in self.headers if h[0].lower() != wanted))

    def encode(self) -> bytes:
        """The request as it goes upstream: ``Connection: close``, the body in its own framing."""
        head = [f"{self.method} {self.target} {self.version}"]
        head += [f"{name}: {value}" for name, value in self.headers]
        head += ["Connection: close", "", ""]
        return "\r\n".join(head).encode("latin-1") + self.body


def s3_error(status: int, reason: str, code: str, message: str, extra: str = "") -> bytes:
    """A whole S3 error response, for a policy that answers in the server's place.

    >>> s3_error(503, "Slow Down", "SlowDown", "Please reduce your request rate.").split(b"\\r\\n")[0]
    b'HTTP/1.1 503 Slow Down'
    """
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>{extra}</Error>"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class Exchange:
    """One client connection and its one request: what a policy can do with it."""

    def __init__(self, request: Request, client: socket.socket, upstream: tuple[str, int]) -> None:
        self.request = request
        self._client = client
        self._upstream = upstream
        self.reset = False
        """Close the client's connection with a reset (a dropped connection), not a FIN."""

    def forward(self, request: Request | None = None) -> bytes:
        """Send ``request`` (default: the one received) upstream; the whole response."""
        sent = self.request if request is None else request
        with socket.create_connection(self._upstream, timeout=_UPSTREAM_TIMEOUT) as upstream:
            upstream.sendall(sent.encode())
            chunks: list[bytes] = []
            while chunk := upstream.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    def reply(self, response: bytes) -> None:
        """Send ``response`` to the client."""
        self._client.sendall(response)


class Relay:
    """``with Relay(upstream_port) as relay:`` then point clients at ``relay.endpoint_url``.

    Subclasses override ``handle``; ``counts["relay-errors"]`` counts the
    exchanges a socket error ended.
    """

    name = "relay"
    backlog = 128

    def __init__(self, upstream_port: int) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def handle(self, exchange: Exchange) -> None:
        """The policy: what to do with one request. This one forwards it and relays the answer."""
        exchange.reply(exchange.forward())

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def start(self) -> Self:
        relay = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                relay._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = relay.backlog

        self._server = Server((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _serve(self, client: socket.socket) -> None:
        try:
            request = _read_request(client)
        except (OSError, ValueError):
            return
        if request is None:
            return
        exchange = Exchange(request, client, self.upstream)
        try:
            self.handle(exchange)
        except OSError:
            self.count("relay-errors")
        finally:
            if exchange.reset:
                _abort(client)
            client.close()


def _abort(sock: socket.socket) -> None:
    """Close with a reset, as a dropped connection looks to the client."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _read_request(client: socket.socket) -> Request | None:
    """One HTTP/1.1 request; None if the client hung up before sending one."""
    stream: BinaryIO = client.makefile("rb")
    line = stream.readline(_MAX_LINE)
    if not line:
        return None
    headers: list[tuple[str, str]] = []
    length, chunked = 0, False
    while True:
        header = stream.readline(_MAX_LINE)
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        name, value = name.strip(), value.strip()
        lowered = name.lower()
        if lowered == "connection":
            continue
        if lowered == "content-length":
            length = int(value)
        if lowered == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
        if lowered == "expect":
            # botocore asks before it sends a PUT body; answer for the server.
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            continue
        headers.append((name, value))
    body = _read_chunked(stream) if chunked else stream.read(length) if length else b""
    return Request.parse(line, tuple(headers), body)


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
