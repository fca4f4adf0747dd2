"""A test double of an S3 server without conditional deletes: a proxy on 127.0.0.1.

It forwards every request to a real local S3 server, except a DELETE that
carries ``If-Match``:

* ``refuse`` answers it 501 NotImplemented itself, as a server that does not
  implement the header may;
* ``ignore`` strips the header and forwards an unconditional DELETE, as a
  server that silently ignores unknown conditions does (Cloudflare R2
  documents no conditional DELETE);
* with no mode, it forwards them; ``lose_then_conflict`` then forwards the
  first one but loses its response (the connection closes: botocore
  resends), answers the resend 409 ConditionalRequestConflict, and forwards
  the rest: a DELETE that was applied, then looked like it never was.

One request per connection (``Connection: close``); it binds 127.0.0.1 only
and forwards only to its one upstream.
"""

from __future__ import annotations

import http.client
import threading
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

from pail.local import LOOPBACK

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}
)
_NOT_IMPLEMENTED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code>'
    b"<Message>A header you provided implies functionality that is not implemented"
    b"</Message><Header>If-Match</Header></Error>"
)


class DeleteMode(StrEnum):
    REFUSE = "refuse"
    IGNORE = "ignore"


_CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conflicting conditional operation is in progress.</Message></Error>"
)


class RefusingProxy:
    """``with RefusingProxy(upstream_url, mode) as proxy:`` then use ``proxy.endpoint_url``."""

    def __init__(
        self,
        upstream_url: str,
        mode: DeleteMode | None = DeleteMode.REFUSE,
        *,
        lose_then_conflict: bool = False,
    ) -> None:
        parts = urlsplit(upstream_url)
        assert parts.hostname == LOOPBACK and parts.port is not None
        self.upstream = (parts.hostname, parts.port)
        self.mode = mode
        self.lose_then_conflict = lose_then_conflict
        self.conditional_deletes = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> RefusingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # so that Expect: 100-continue is answered

            def do_GET(self) -> None:
                proxy._relay(self)

            def do_HEAD(self) -> None:
                proxy._relay(self)

            def do_PUT(self) -> None:
                proxy._relay(self)

            def do_POST(self) -> None:
                proxy._relay(self)

            def do_DELETE(self) -> None:
                proxy._relay(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="refusing-proxy", daemon=True
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

    def __enter__(self) -> RefusingProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _relay(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        lose = False
        if request.command == "DELETE" and any(k.lower() == "if-match" for k in headers):
            with self._lock:
                self.conditional_deletes += 1
                seen = self.conditional_deletes
            if self.mode is DeleteMode.REFUSE:
                self._answer(request, 501, {"Content-Type": "application/xml"}, _NOT_IMPLEMENTED)
                return
            if self.lose_then_conflict and seen == 2:
                self._answer(request, 409, {"Content-Type": "application/xml"}, _CONFLICT)
                return
            lose = self.lose_then_conflict and seen == 1
            if self.mode is DeleteMode.IGNORE:
                headers = {k: v for k, v in headers.items() if k.lower() != "if-match"}
        connection = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            connection.request(request.command, request.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            if lose:  # applied upstream; the client never hears of it
                request.close_connection = True
                return
            kept = {
                k: v
                for k, v in response.getheaders()
                if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"
            }
            self._answer(request, response.status, kept, data)
        finally:
            connection.close()

    @staticmethod
    def _answer(
        request: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.send_header("Connection", "close")
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)
        request.close_connection = True
