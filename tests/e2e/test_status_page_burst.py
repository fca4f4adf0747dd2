"""The status page server under a burst: 200 clients at once, some hanging up mid-answer.

Speed is measured by ``scripts/status-page-load``, not here; this checks that
every client that waits gets the page and that clients that leave early
cost no traceback on stderr.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
from urllib.parse import urlsplit

import pytest

from pail.status_page import StatusPageServer

CLIENTS = 200
LEAVING = 50
BODY = b"<!doctype html>" + b"x" * 2_000_000  # large enough that a gone client breaks the write


def fetch(host: str, port: int) -> int:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def hang_up(host: str, port: int) -> None:
    """Send a request, then reset the connection without reading the answer."""
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: page\r\n\r\n")
        sock.recv(1)  # the answer has started
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_given_200_concurrent_clients_some_leaving_when_served_then_all_others_get_it_quietly(
    capfd: pytest.CaptureFixture[str],
) -> None:
    statuses: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    with StatusPageServer(html=BODY) as server:
        parts = urlsplit(server.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 0
        start = threading.Barrier(CLIENTS)

        def client(index: int) -> None:
            try:
                start.wait(60)
                if index < LEAVING:
                    hang_up(host, port)
                    return
                status = fetch(host, port)
                with lock:
                    statuses.append(status)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                with lock:
                    failures.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)  # a bound for a failing run; each client has its own 60 s timeout
        stuck = [thread.name for thread in threads if thread.is_alive()]
        after = fetch(host, port)  # the server still answers after the burst

    assert stuck == []
    assert after == 200
    assert failures == []
    assert statuses == [200] * (CLIENTS - LEAVING)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err
