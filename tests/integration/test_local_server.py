"""The embedded local S3 server: it starts, answers, and never outlives its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pail.local import LOOPBACK, LocalS3
from tests.support.waiting import wait_until


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
    try:
        assert parent.stdout is not None
        port, child = (int(x) for x in parent.stdout.readline().split())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}") as response:
            assert response.status == 200
    finally:
        parent.send_signal(signal.SIGKILL)  # also when the test failed half-way
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()

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


def test_given_a_port_taken_after_construction_when_started_then_the_server_binds_its_own() -> None:
    server = LocalS3()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        # Before the child bound port 0 itself, LocalS3() picked a free port here
        # and the child bound it later: a port another process could take meanwhile.
        squatter.bind((LOOPBACK, server.port))
        squatter.listen()

        with server:
            assert server.port not in (0, squatter.getsockname()[1])
            with urllib.request.urlopen(server.endpoint_url, timeout=10) as response:
                assert response.status == 200


def test_given_port_0_when_the_module_runs_then_it_writes_the_port_it_bound(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    child = subprocess.Popen(
        [sys.executable, "-m", "pail.local", "--port", "0", "--port-file", str(port_file)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        listening = child.stdout.readline()  # printed once bound, just before the file is written
        assert listening.startswith("pail local S3 server listening on http://127.0.0.1:")
        wait_until(port_file.exists, 30)
        port = int(port_file.read_text())
        assert listening.strip().endswith(f":{port}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=10) as response:
            assert response.status == 200
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-02T19:20:02.000Z",
        "2026-12-02T19:20:02.123Z",
        "2026-12-02T19:20:02.123456Z",
        "2026-12-02T19:20:02Z",
        # Not moto's shape: botocore parses these, as it did before.
        "1764700000",
        "20261202",
        "2026-12-02",
        "2026-12-02T19:20:02+01:00",
        "2026-12-02T19:20:02.1234Z",
    ],
)
def test_given_a_timestamp_when_the_quick_parse_reads_it_then_it_is_what_botocore_reads(
    value: str,
) -> None:
    import moto.core.serialize
    from botocore.utils import parse_to_aware_datetime

    from pail.local import build_app

    build_app()  # installs the quick parse
    quick = getattr(moto.core.serialize, "parse_to_aware_datetime")  # noqa: B009 - not re-exported
    assert quick is not parse_to_aware_datetime
    assert quick(value) == parse_to_aware_datetime(value)
    assert quick(value).utcoffset() == parse_to_aware_datetime(value).utcoffset()
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    assert quick(value).strftime(stamp) == parse_to_aware_datetime(value).strftime(stamp)
