"""The embedded local S3 server: moto's S3, made atomic, on loopback.

moto 5.2.5 implements S3's conditional writes as check-then-write with no
lock, so two racing ``If-None-Match: *`` writes can both win. This module
wraps moto's WSGI app so that every mutating request (anything but GET, HEAD
and OPTIONS) runs under one lock, which makes each conditional write atomic
as it is on S3. Reads stay concurrent.

``LocalS3`` starts the server in a child process on a free 127.0.0.1 port
(the child binds port 0 and reports the port it got) and stops it on exit::

    with LocalS3() as server:
        pail = Pail.connect("jobs", **server.connect_kwargs())
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pail.config import ENV_ENDPOINT_URL
from pail.errors import ConfigurationError, StorageError

LOOPBACK = "127.0.0.1"
ACCESS_KEY = "pail-local"
SECRET_KEY = "pail-local-secret"
REGION = "us-east-1"
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SerialisedWrites:
    """WSGI middleware: one lock around every request that can change state."""

    def __init__(self, app: WSGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("REQUEST_METHOD", "GET") in _READ_METHODS:
            return self._app(environ, start_response)
        with self._lock:
            # Drain the body inside the lock: moto may apply the write lazily
            # while the response iterable is consumed.
            return list(self._app(environ, start_response))


def build_app() -> WSGIApp:
    """moto's S3 WSGI application wrapped in ``SerialisedWrites``."""
    try:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "the local S3 server needs moto: pip install 'pailq[local]'"
        ) from exc
    # An S3-only app: every request is S3, signed or presigned, whatever its Host.
    app: WSGIApp = DomainDispatcherApplication(create_backend_app)
    return SerialisedWrites(app)


def exit_with_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Exit this process once ``parent_pid`` is gone, so a killed parent leaves no server behind."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="pail-parent-watch", daemon=True).start()


def create_buckets(endpoint_url: str, buckets: Iterable[str]) -> list[str]:
    """Create ``buckets`` on the local server at ``endpoint_url``; return those created now.

    A bucket that already exists is left as it is.
    """
    from pail.store.client import build_client, create_bucket

    client = build_client(
        endpoint_url=endpoint_url,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        region=REGION,
    )
    return [bucket for bucket in buckets if create_bucket(client, bucket)]


def credentials_export() -> str:
    """The shell line that gives the AWS SDK (and ``pail``) the local server's credentials.

    >>> credentials_export()
    'export AWS_ACCESS_KEY_ID=pail-local AWS_SECRET_ACCESS_KEY=pail-local-secret'
    """
    return f"export AWS_ACCESS_KEY_ID={ACCESS_KEY} AWS_SECRET_ACCESS_KEY={SECRET_KEY}"


def local_env_lines(endpoint_url: str) -> list[str]:
    """Shell lines that point the AWS SDK and ``pail`` at a local server.

    >>> local_env_lines("http://127.0.0.1:9000")[-1]
    'export PAIL_ENDPOINT_URL=http://127.0.0.1:9000'
    """
    return [
        credentials_export(),
        f"export AWS_REGION={REGION}",
        f"export {ENV_ENDPOINT_URL}={endpoint_url}",
    ]


def serve(
    host: str = LOOPBACK,
    port: int = 9000,
    *,
    buckets: Iterable[str] = (),
    port_file: str | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Run the server in the foreground until interrupted, creating ``buckets`` once it listens.

    ``port`` 0 takes any free port; the one bound is in the "listening on"
    line, passed to ``on_listening(endpoint)``, and written to ``port_file``
    (whoever started this process reads it there: no port is chosen before
    it is bound, so no other process can take it in between).
    """
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    server = make_server(host, port, build_app(), threaded=True, request_handler=QuietHandler)
    endpoint = f"http://{host}:{server.server_port}"
    if on_listening is not None:
        on_listening(endpoint)
    print(f"pail local S3 server listening on {endpoint}", flush=True)
    if port_file is not None:
        _write_port(port_file, server.server_port)
    wanted = list(buckets)
    if wanted:
        # From a thread: the requests wait in the listen backlog until
        # serve_forever below starts answering them.
        def make() -> None:
            try:
                for bucket in create_buckets(endpoint, wanted):
                    print(f"created bucket s3://{bucket}", flush=True)
            except StorageError as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)

        threading.Thread(target=make, name="pail-create-buckets", daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _write_port(path: str, port: int) -> None:
    """Write ``port`` to ``path`` whole or not at all (a reader polls for it)."""
    partial = Path(f"{path}.partial")
    partial.write_text(f"{port}\n")
    partial.replace(path)


def _read_port(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


class LoopbackEndpoint:
    """How clients reach an S3 server on 127.0.0.1: the URL, ``Pail.connect`` arguments, env."""

    host: str = LOOPBACK
    port: int = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def connect_kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``Pail.connect`` that reach this server."""
        return {
            "endpoint_url": self.endpoint_url,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "region": REGION,
        }

    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 and pail at this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "PAIL_ENDPOINT_URL": self.endpoint_url,
        }


class LocalS3(LoopbackEndpoint):
    """A local S3 server in a child process, bound to 127.0.0.1 on a free port.

    Without ``port`` the child binds port 0 and reports the port it got
    (``port`` is 0 until ``start`` returns): a port chosen here and bound
    there could be taken in between by any other process, such as another
    test worker's server.
    """

    def __init__(self, port: int | None = None, *, startup_timeout: float = 30.0) -> None:
        self.host = LOOPBACK
        self.port = 0
        self._requested = port or 0
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> LocalS3:
        self.port = 0
        self._workdir = tempfile.TemporaryDirectory(prefix="pail-local-")
        port_file = Path(self._workdir.name) / "port"
        command = [
            sys.executable,
            "-m",
            "pail.local",
            "--host",
            self.host,
            "--port",
            str(self._requested),
            "--port-file",
            str(port_file),
            "--parent-pid",
            str(os.getpid()),
        ]
        # A file, not a pipe: nobody reads the server's stderr while it runs,
        # and a full pipe would block the server the next time it logs.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._stderr.seek(0)
                stderr = self._stderr.read().decode(errors="replace")
                self.stop()
                raise StorageError(f"local S3 server exited at start: {stderr.strip()[-500:]}")
            if not self.port:
                self.port = _read_port(port_file) or 0
                if not self.port:
                    time.sleep(0.05)  # the child is still importing moto
                    continue
            try:
                with urllib.request.urlopen(self.endpoint_url, timeout=1):
                    return self
            except urllib.error.HTTPError:
                return self  # it answered: it is up
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise StorageError(f"local S3 server did not start within {self._startup_timeout} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Run pail's local S3 server (moto, atomic writes)."
    )
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when it is gone")
    parser.add_argument("--bucket", action="append", default=[], help="create this bucket")
    parser.add_argument(
        "--port-file", default=None, help="write the port bound here (with --port 0: any free one)"
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    serve(args.host, args.port, buckets=args.bucket, port_file=args.port_file)


if __name__ == "__main__":
    main()
