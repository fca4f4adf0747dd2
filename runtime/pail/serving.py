"""A small HTTP server on a background thread: the status page's and the dashboard's.

Both serve a browser from the operator's own process, so both want the same
things of the standard library's server: a thread per request, a listen
backlog for bursts, silence about clients that hang up, and a clean stop.
"""

from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class QuietThreadingServer(ThreadingHTTPServer):
    """One thread per request, a listen backlog for bursts, and quiet about clients that hang up."""

    daemon_threads = True
    # socketserver's default backlog is 5: a burst of browsers (a demo shown to
    # a room, a page reloaded by many tabs) overflows it, and each dropped SYN
    # costs its client a 1 s, then 3 s, retransmission. The kernel caps it at
    # net.core.somaxconn.
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a closed tab, a reload) is no error worth a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class BackgroundServer[S: QuietThreadingServer]:
    """Runs the server ``bind()`` makes on a daemon thread; ``start``/``stop`` or a ``with`` block.

    >>> class Hello(BackgroundServer[QuietThreadingServer]):
    ...     def bind(self) -> QuietThreadingServer:
    ...         from http.server import BaseHTTPRequestHandler
    ...         return QuietThreadingServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    >>> with Hello("hello") as hello:
    ...     hello.origin.startswith("http://127.0.0.1:")
    True
    """

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._server: S | None = None
        self._thread: threading.Thread | None = None

    def bind(self) -> S:
        """Make (and bind) the server; called once by ``start``."""
        raise NotImplementedError

    @property
    def server(self) -> S:
        """The running server; ``RuntimeError`` before ``start``."""
        if self._server is None:
            raise RuntimeError(f"the {self._thread_name} server is not started")
        return self._server

    @property
    def origin(self) -> str:
        """``http://host:port`` of the running server."""
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        if self._server is None:
            self._server = self.bind()
            # A short poll interval: shutdown() waits up to one interval.
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=self._thread_name,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        thread, self._thread = self._thread, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
