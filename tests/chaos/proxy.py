"""A fault-injecting HTTP proxy on loopback, between S3 clients and the local S3 server.

For a configurable fraction of requests it does one of:

* **drop before:** closes the client's connection without forwarding (nothing applied);
* **drop after:** forwards the request, then closes the client's connection
  without the response (the request was applied; the client sees a broken
  connection and resends it, as after a timeout);
* **503 SlowDown:** answers S3's throttling error itself (nothing applied);
* **delay:** forwards, then holds the response back for up to ``max_delay`` seconds.

Each client connection carries one request (``Connection: close`` both ways),
so the proxy never has to parse a response: it relays bytes until the server
closes. It binds 127.0.0.1 only and forwards only to its one upstream.
"""

from __future__ import annotations

import contextlib
import random
import socket
import socketserver
import struct
import threading
import time
from collections import Counter
from enum import StrEnum
from types import TracebackType
from typing import BinaryIO

from pail.local import LOOPBACK

_SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_MAX_LINE = 65536


class ProxyFault(StrEnum):
    DROP_BEFORE = "drop-before-forwarding"
    DROP_AFTER = "drop-after-forwarding"
    SLOWDOWN = "503-slowdown"
    DELAY = "delayed-response"


class FaultProxy:
    """``with FaultProxy(upstream_port, fault_rate=0.05) as proxy:`` then use ``proxy.endpoint_url``."""

    def __init__(
        self,
        upstream_port: int,
        *,
        fault_rate: float = 0.05,
        max_delay: float = 1.0,
        seed: int | None = None,
    ) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.fault_rate = fault_rate
        self.max_delay = max_delay
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._relay(self.request)

        server = socketserver.ThreadingTCPServer((LOOPBACK, 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="fault-proxy", daemon=True
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

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- one request --------------------------------------------------------

    def _decide(self) -> tuple[ProxyFault | None, float]:
        with self._lock:
            self.counts["requests"] += 1
            if self._rng.random() >= self.fault_rate:
                return None, 0.0
            fault = self._rng.choice(list(ProxyFault))
            self.counts[fault] += 1
            return fault, self._rng.uniform(0.05, self.max_delay)

    def _relay(self, client: socket.socket) -> None:
        try:
            request = _read_request(client)
        except (OSError, ValueError):
            return
        if request is None:
            return
        fault, delay = self._decide()
        try:
            if fault is ProxyFault.DROP_BEFORE:
                return
            if fault is ProxyFault.SLOWDOWN:
                client.sendall(_slowdown_response())
                return
            response = self._forward(request)
            if fault is ProxyFault.DROP_AFTER:
                return
            if fault is ProxyFault.DELAY:
                time.sleep(delay)  # the fault itself: a slow network, not a wait for anything
            client.sendall(response)
        except OSError:
            with self._lock:
                self.counts["relay-errors"] += 1
        finally:
            if fault in (ProxyFault.DROP_BEFORE, ProxyFault.DROP_AFTER):
                _abort(client)
            client.close()

    def _forward(self, request: bytes) -> bytes:
        with socket.create_connection(self.upstream, timeout=30) as upstream:
            upstream.sendall(request)
            chunks: list[bytes] = []
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)


def _abort(sock: socket.socket) -> None:
    """Close with a reset, as a dropped connection looks to the client."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _slowdown_response() -> bytes:
    head = (
        "HTTP/1.1 503 Slow Down\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(_SLOWDOWN_BODY)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + _SLOWDOWN_BODY


def _read_request(client: socket.socket) -> bytes | None:
    """One HTTP/1.1 request, re-framed with ``Connection: close``; None if the client hung up."""
    stream: BinaryIO = client.makefile("rb")
    line = stream.readline(_MAX_LINE)
    if not line:
        return None
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
            # botocore asks before sending a PUT body; answer for the server.
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            continue
        headers.append(header)
    body = _read_chunked(stream) if chunked else stream.read(length) if length else b""
    return line + b"".join(headers) + b"Connection: close\r\n\r\n" + body


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
