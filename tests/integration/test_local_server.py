"""The embedded local S3 server: it starts, answers, and never outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest


@pytest.mark.slow
def test_given_parent_killed_when_server_runs_then_server_exits_too() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pail.local import LocalS3\n"
            "server = LocalS3().start()\n"
            "print(server.port, server._process.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    port, child = (int(x) for x in parent.stdout.readline().split())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}") as response:
        assert response.status == 200

    parent.send_signal(signal.SIGKILL)
    parent.wait()

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        # The child is ours only until init reaps it; waitpid is not ours to call.
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the local S3 server outlived its parent")
