"""An HTTP proxy on loopback that does to each S3 request what the test's script says.

Where the chaos proxy injects faults at random, this one is told exactly which
request to drop, hold or let through, so a test can put a fault or a signal at
one step of the protocol:

* ``FORWARD``: relay the request and its response;
* ``DROP_BEFORE``: reset the client's connection without forwarding (nothing applied);
* ``DROP_AFTER``: forward, then reset the connection without the response (applied,
  but the client never learns it);
* ``HOLD``: wait until the test calls ``release()`` (``held`` is set meanwhile), then forward.

The script is a function of the request (``Request``: method, bucket-relative
key, query string); it may keep state. Each connection carries one request
(``Connection: close``), so responses are relayed byte for byte without being
parsed. It binds 127.0.0.1 and forwards only to its one upstream port.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import unquote

from pail import Pail
from pail.local import ACCESS_KEY, LOOPBACK, REGION, SECRET_KEY

HOLD_LIMIT = 60.0
"""Seconds a held request waits for ``release()`` before it is forwarded anyway."""
_MAX_LINE = 65536


class Action(StrEnum):
    FORWARD = "forward"
    DROP_BEFORE = "drop-before"
    DROP_AFTER = "drop-after"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class Request:
    """What the script sees of a request: ``method``, object ``key`` (path-style), ``query``, ``body``."""

    method: str
    key: str
    query: str
    body: bytes = b""

    def is_(self, method: str, prefix: str) -> bool:
        """True for ``method`` on a key under ``prefix`` (a LIST is a GET with the prefix in its query)."""
        if method == "LIST":
            return self.method == "GET" and "list-type=2" in self.query and prefix in self.query
        return self.method == method and self.key.startswith(prefix)


Script = Callable[[Request], Action]


def forward_all(request: Request) -> Action:
    return Action.FORWARD


class ScriptedProxy:
    """``with ScriptedProxy(upstream_port) as proxy:``; set ``proxy.script``; use ``proxy.endpoint_url``."""

    def __init__(self, upstream_port: int, script: Script = forward_all) -> None:
        self.upstream = (LOOPBACK, upstream_port)
        self.script = script
        self.counts: Counter[str] = Counter()
        self.held = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def release(self) -> None:
        """Let held requests (and any held later) through."""
        self._release.set()

    def start(self) -> ScriptedProxy:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._relay(self.request)

        server = socketserver.ThreadingTCPServer((LOOPBACK, 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.request_queue_size = 128
        server.server_bind()
        server.server_activate()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="scripted-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ScriptedProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _relay(self, client: socket.socket) -> None:
        try:
            parsed = _read_request(client)
        except (OSError, ValueError):
            return
        if parsed is None:
            return
        request, raw = parsed
        action = self.script(request)
        with self._lock:
            self.counts[action] += 1
        try:
            if action is Action.DROP_BEFORE:
                return
            if action is Action.HOLD:
                self.held.set()
                self._release.wait(HOLD_LIMIT)
            response = self._forward(raw)
            if action is Action.DROP_AFTER:
                return
            client.sendall(response)
        except OSError:
            with self._lock:
                self.counts["relay-errors"] += 1
        finally:
            if action in (Action.DROP_BEFORE, Action.DROP_AFTER):
                _abort(client)
            client.close()

    def _forward(self, raw: bytes) -> bytes:
        with socket.create_connection(self.upstream, timeout=30) as upstream:
            upstream.sendall(raw)
            chunks: list[bytes] = []
            while chunk := upstream.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)


def connect_through(proxy: ScriptedProxy, bucket: str, **options: Any) -> Pail:
    """A ``Pail`` on the local server's ``bucket`` whose every request goes through ``proxy``."""
    return Pail.connect(
        bucket,
        endpoint_url=proxy.endpoint_url,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        region=REGION,
        **options,
    )


def _abort(sock: socket.socket) -> None:
    """Close with a reset, as a dropped connection looks to the client."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _read_request(client: socket.socket) -> tuple[Request, bytes] | None:
    """One HTTP/1.1 request, re-framed with ``Connection: close``; None if the client hung up."""
    stream: BinaryIO = client.makefile("rb")
    line = stream.readline(_MAX_LINE)
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    path, _, query = target.partition("?")
    # Path-style addressing: /{bucket}/{key}.
    key = unquote(path.lstrip("/").partition("/")[2])
    headers: list[bytes] = []
    length, chunked = 0, False
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
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # answered for the server
            continue
        headers.append(header)
    body = _read_chunked(stream) if chunked else stream.read(length) if length else b""
    raw = line + b"".join(headers) + b"Connection: close\r\n\r\n" + body
    return Request(method, key, unquote(query), body), raw


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
