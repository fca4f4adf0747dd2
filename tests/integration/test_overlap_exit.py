"""The interpreter's exit is bounded while a background request hangs (issue 23, item 11).

A lease removal that ``work_once`` left in flight runs on the overlap pool.
Its threads used to be ``concurrent.futures``' (not daemons): at exit Python
joined them, so a DELETE to an endpoint that never answers held the process
for botocore's whole timeouts (pail's client: 5 tries of 20 s, times 3
background tries). The exit now waits at most ``FLUSH_TIMEOUT`` for them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading

from pail.protocol.overlap import FLUSH_TIMEOUT
from tests.support.command import ROOT, LineReader, process_env

CHILD = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    from pail.protocol.overlap import Threads
    from pail.store.client import build_client
    from pail.store.s3 import S3Store

    client = build_client(
        endpoint_url=sys.argv[1], access_key_id="test", secret_access_key="test"
    )
    store = S3Store(client, "silent")
    overlap = Threads(2)
    overlap.later("job x: removing its lease", lambda: store.delete("run/x"))
    print("left in flight", flush=True)
    """
)


class SilentServer:
    """A socket on 127.0.0.1 that accepts connections, reads what comes, and never answers."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.requested = threading.Event()
        self._stopped = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            self._held.append(connection)
            if connection.recv(65536):
                self.requested.set()  # a request arrived; it gets no answer

    def close(self) -> None:
        self._stopped.set()
        self._socket.close()
        for connection in self._held:
            connection.close()
        self._thread.join(10)


def test_given_a_lease_removal_to_a_server_that_never_answers_when_the_process_exits_then_it_waits_at_most_the_flush_timeout() -> (
    None
):
    server = SilentServer()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, f"http://127.0.0.1:{server.port}"],
        cwd=ROOT,
        env=process_env({}),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        LineReader(child.stdout).wait_for("left in flight")
        assert server.requested.wait(30), "the DELETE never reached the server"
        # Unbounded, the exit waits for botocore: 20 s per try before the first
        # timeout alone. Bounded, it waits FLUSH_TIMEOUT (3 s) and goes.
        returncode = child.wait(timeout=FLUSH_TIMEOUT + 12)
        errors = child.stderr.read()
        assert returncode == 0, errors
        assert "still in flight" in errors  # it says what it left behind
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
        server.close()
