"""The embedded local S3 server: moto's S3, made atomic, on loopback.

moto 5.2.5 implements S3's conditional writes as check-then-write with no
lock, so two racing ``If-None-Match: *`` writes can both win. This module
wraps moto's WSGI app so that every mutating request (anything but GET, HEAD
and OPTIONS) runs under one lock, which makes each conditional write atomic
as it is on S3. Reads stay concurrent.

moto's server also answers CORS for any origin and any method, and checks no
signature, so any web page the operator visits could write and delete the
local bucket's objects. ``BrowserGuard`` answers CORS instead: by default a
page may send only GET and HEAD (what the status page needs), and only from
this machine (``CorsPolicy``; ``pail server --cors-method/--cors-origin``
allow more).

``LocalS3`` starts the server in a child process on a free 127.0.0.1 port
(the child binds port 0 and reports the port it got) and stops it on exit::

    with LocalS3() as server:
        pail = Pail.connect("jobs", **server.connect_kwargs())
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from pail.config import ENV_ENDPOINT_URL
from pail.errors import ConfigurationError, StorageError
from pail.status_page import EXPOSED_HEADERS

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


# -- which browser pages may use the server ------------------------------------

CORS_READ_METHODS: tuple[str, ...] = ("GET", "HEAD")
"""What ``pail server`` lets a browser page do by default: what the status page needs."""
CORS_METHODS: tuple[str, ...] = ("GET", "HEAD", "PUT", "POST", "DELETE")
"""What a flag may add (``--cors-method``)."""
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_CORS_MAX_AGE = "300"


def is_loopback_origin(origin: str) -> bool:
    """True for a page served from this machine: ``http(s)://`` 127.0.0.1, localhost, ::1, *.localhost.

    >>> is_loopback_origin("http://127.0.0.1:8123"), is_loopback_origin("https://example.com")
    (True, False)
    >>> is_loopback_origin("null"), is_loopback_origin("http://127.0.0.1.example.com")
    (False, False)
    """
    try:
        parts = urlsplit(origin)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or host is None or parts.path not in ("", "/"):
        return False
    return host in _LOOPBACK_HOSTS or host.endswith(".localhost")


def is_loopback_host(host: str) -> bool:
    """True for a ``Host`` header (or a listen address) naming this machine, with or without a port.

    >>> is_loopback_host("127.0.0.1:9000"), is_loopback_host("[::1]:80"), is_loopback_host("x.localhost")
    (True, True, True)
    >>> is_loopback_host("rebound.attacker.example:9000"), is_loopback_host("0.0.0.0")
    (False, False)
    """
    if host.startswith("[") or host.count(":") <= 1:
        try:
            name = urlsplit(f"//{host}").hostname
        except ValueError:
            return False
    else:
        name = host  # a bare IPv6 listen address such as ::1
    if name is None:
        return False
    return name in _LOOPBACK_HOSTS or name.endswith(".localhost")


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """Which browser pages may send which requests to the local server.

    The server checks no signature (moto accepts any request), so what a web
    page may send it is what any site the operator visits may do to the
    local bucket. By default: GET and HEAD (the status page polls with GET),
    from pages served on this machine. ``methods`` adds more (PUT, POST,
    DELETE let a page write and delete objects); ``origins`` adds pages
    served elsewhere, exactly as a browser spells their origin, or ``*`` for any.
    """

    methods: frozenset[str] = frozenset(CORS_READ_METHODS)
    origins: frozenset[str] = frozenset()

    @classmethod
    def of(cls, methods: Iterable[str] = (), origins: Iterable[str] = ()) -> CorsPolicy:
        """The default policy plus ``methods`` and ``origins``; a method not in ``CORS_METHODS`` is refused."""
        extra = {method.upper() for method in methods}
        unknown = sorted(extra - set(CORS_METHODS))
        if unknown:
            raise ConfigurationError(
                f"CORS method {', '.join(unknown)} is not one of {', '.join(CORS_METHODS)}"
            )
        return cls(frozenset(CORS_READ_METHODS) | extra, frozenset(origins))

    def allows_origin(self, origin: str) -> bool:
        return "*" in self.origins or origin in self.origins or is_loopback_origin(origin)

    def allows(self, origin: str, method: str) -> bool:
        """Whether a page at ``origin`` may send a ``method`` request."""
        return method in self.methods and self.allows_origin(origin)

    def arguments(self) -> list[str]:
        """This policy as ``python -m pail.local`` options."""
        args = []
        for method in sorted(self.methods - set(CORS_READ_METHODS)):
            args += ["--cors-method", method]
        for origin in sorted(self.origins):
            args += ["--cors-origin", origin]
        return args


class BrowserGuard:
    """WSGI middleware: answers CORS by ``CorsPolicy`` and refuses what it does not allow.

    moto's server answers CORS for every origin and every method, so any web
    page could PUT and DELETE objects of the local bucket. Only browsers send
    ``Origin`` (SDKs and curl do not), and they send it on every cross-origin
    request that could change something, preflighted (PUT, DELETE) or not (a
    form's POST): a request with an ``Origin`` the policy does not allow is
    refused here, before moto sees it, so even a request a browser sends
    without asking first cannot write.
    """

    def __init__(
        self, app: WSGIApp, policy: CorsPolicy | None = None, *, loopback_hosts: bool = False
    ) -> None:
        self._app = app
        self.policy = policy or CorsPolicy()
        self.loopback_hosts = loopback_hosts
        """Refuse a ``Host`` that is not this machine's (DNS rebinding): for a loopback server."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        host = str(environ.get("HTTP_HOST", ""))
        if self.loopback_hosts and host and not is_loopback_host(host):
            # A page whose own name was rebound to 127.0.0.1 reads "same-origin",
            # and a browser sends no Origin on a same-origin GET: the Host tells it.
            return self._refuse_host(start_response, host)
        origin = environ.get("HTTP_ORIGIN")
        if origin is None:
            return self._app(environ, start_response)  # not a browser page: S3 as it is
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        asked = environ.get("HTTP_ACCESS_CONTROL_REQUEST_METHOD")
        if method == "OPTIONS" and asked:
            return self._preflight(environ, start_response, origin, str(asked).upper())
        if not self.policy.allows(origin, method):
            return self._refuse(start_response, origin, method)

        def with_cors(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            kept += self._allow_headers(origin)
            kept.append(("Access-Control-Expose-Headers", ", ".join(EXPOSED_HEADERS)))
            return start_response(status, kept, exc_info)

        return self._app(environ, with_cors)

    def _allow_headers(self, origin: str) -> list[tuple[str, str]]:
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]

    def _preflight(
        self, environ: dict[str, Any], start_response: Callable[..., Any], origin: str, asked: str
    ) -> list[bytes]:
        if not self.policy.allows(origin, asked):
            return self._refuse(start_response, origin, asked)
        headers = [
            *self._allow_headers(origin),
            ("Access-Control-Allow-Methods", ", ".join(sorted(self.policy.methods))),
            ("Access-Control-Max-Age", _CORS_MAX_AGE),
            ("Content-Length", "0"),
        ]
        wanted = environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS")
        if wanted:
            headers.append(("Access-Control-Allow-Headers", str(wanted)))
        start_response("200 OK", headers)
        return [b""]

    def _refuse_host(self, start_response: Callable[..., Any], host: str) -> list[bytes]:
        body = (
            f"pail server: Host {host!r} is not this machine; this server listens on loopback "
            "and answers requests addressed to 127.0.0.1, localhost or [::1] only\n"
        ).encode()
        start_response(
            "403 Forbidden",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _refuse(self, start_response: Callable[..., Any], origin: str, method: str) -> list[bytes]:
        body = (
            f"pail server: a page at {origin} may not send {method} requests here "
            f"(browser pages may send {', '.join(sorted(self.policy.methods))}, from pages on "
            "this machine; pail server --cors-method/--cors-origin allow more)\n"
        ).encode()
        start_response(
            "403 Forbidden",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]


def build_app(cors: CorsPolicy | None = None, *, loopback_hosts: bool = False) -> WSGIApp:
    """moto's S3 WSGI application in ``SerialisedWrites``, behind a ``BrowserGuard`` for ``cors``.

    ``loopback_hosts`` (a server on a loopback address) also refuses requests
    whose ``Host`` is not this machine's.
    """
    try:
        from moto.moto_server.werkzeug_app import create_backend_app
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "the local S3 server needs moto: pip install 'pailq[local]'"
        ) from exc
    # An S3-only app: every request is S3, signed or presigned, whatever its Host.
    # Not moto's DomainDispatcherApplication, which works out each request's
    # service under a lock by listing moto's package folder (some 175 stats),
    # twice: half of a PUT's or GET's CPU in the server (4.2 -> 1.8 ms a PUT).
    app: WSGIApp = create_backend_app("s3")
    _parse_moto_timestamps_quickly()
    return BrowserGuard(SerialisedWrites(app), cors, loopback_hosts=loopback_hosts)


_MOTO_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3}|\.\d{6})?Z")


def _parse_moto_timestamps_quickly() -> None:
    """Parse the timestamps moto's serializer reads back (one per listed key) without dateutil.

    moto keeps each key's LastModified as text and its response serializer parses
    it again through botocore's ``parse_to_aware_datetime`` (dateutil): a third of
    a 1,000-key LIST's CPU. Its own shape, ``2026-12-02T19:20:02.000Z``, parses
    to the same UTC datetime with ``datetime.fromisoformat``; any other value
    goes to botocore as before.
    """
    import moto.core.serialize

    serialize: Any = moto.core.serialize  # its import of botocore's parser is not re-exported
    original = serialize.parse_to_aware_datetime
    if getattr(original, "pail_quick", False):
        return

    def parse(value: Any) -> Any:
        if isinstance(value, str) and _MOTO_TIMESTAMP.fullmatch(value):
            return datetime.datetime.fromisoformat(value).astimezone(datetime.UTC)
        return original(value)

    parse.pail_quick = True  # type: ignore[attr-defined]
    serialize.parse_to_aware_datetime = parse


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
    cors: CorsPolicy | None = None,
) -> None:
    """Run the server in the foreground until interrupted, creating ``buckets`` once it listens.

    ``port`` 0 takes any free port; the one bound is in the "listening on"
    line, passed to ``on_listening(endpoint)``, and written to ``port_file``
    (whoever started this process reads it there: no port is chosen before
    it is bound, so no other process can take it in between). ``cors`` says
    what browser pages may send (``CorsPolicy``; default: GET and HEAD from
    pages on this machine).
    """
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    app = build_app(cors, loopback_hosts=is_loopback_host(host))
    server = make_server(host, port, app, threaded=True, request_handler=QuietHandler)
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

    def __init__(
        self,
        port: int | None = None,
        *,
        startup_timeout: float = 30.0,
        cors: CorsPolicy | None = None,
    ) -> None:
        self.host = LOOPBACK
        self.cors = cors or CorsPolicy()
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
            *self.cors.arguments(),
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
    parser.add_argument(
        "--cors-method",
        action="append",
        default=[],
        choices=CORS_METHODS,
        help="let browser pages send this method too (default: GET and HEAD only)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        help="let pages from this origin (or '*': any) use the server (default: this machine's)",
    )
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    cors = CorsPolicy.of(args.cors_method, args.cors_origin)
    serve(args.host, args.port, buckets=args.bucket, port_file=args.port_file, cors=cors)


if __name__ == "__main__":
    main()
