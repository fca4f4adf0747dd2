"""A small Lambda Runtime API on 127.0.0.1, and one function instance polling it with awslambdaric.

The endpoints are the ones a runtime interface client uses
(``/2018-06-01/runtime/...``): ``invocation/next`` (long poll, with the
request id, deadline and function ARN headers), ``invocation/{id}/response``,
``invocation/{id}/error`` and ``init/error``. One instance serves one
invocation at a time, as in Lambda.

``FunctionInstance`` starts ``python -m awslambdaric <handler>`` as Lambda's
bootstrap does: in the task root, with the function's environment, and with
``sys.path`` as Lambda lays it out (task root, the layers' ``/opt/python``,
then the runtime's own folder holding nothing but awslambdaric). It records
when the process started, when it first asked for work (the end of its
init) and when each invocation answered.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import IO, Any

from .proxy import QuietServer

_PREFIX = "/2018-06-01/runtime"


@dataclass
class Invocation:
    """One event, and how the function answered it."""

    event: Any
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    deadline_ms: int = 0
    started: float = 0.0
    finished: float = 0.0
    result: Any = None
    error: dict[str, Any] | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def duration(self) -> float:
        return self.finished - self.started


@dataclass(frozen=True)
class InitError:
    """What ``init/error`` reported: the handler could not be loaded."""

    error_type: str
    message: str


class RuntimeApi:
    """The Runtime API of one function instance."""

    def __init__(self, function_arn: str, timeout: float) -> None:
        self.function_arn = function_arn
        self.timeout = timeout
        self.pending: queue.Queue[Invocation] = queue.Queue()
        self.by_id: dict[str, Invocation] = {}
        self.init_error: InitError | None = None
        self.first_poll: float | None = None
        self.failed = threading.Event()
        self._server = QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != f"{_PREFIX}/invocation/next":
                    self._reply(404, {"errorMessage": f"no {self.path}"})
                    return
                if api.first_poll is None:
                    api.first_poll = time.monotonic()
                invocation = api.pending.get()
                invocation.started = time.monotonic()
                invocation.deadline_ms = int((time.time() + api.timeout) * 1000)
                api.by_id[invocation.request_id] = invocation
                payload = json.dumps(invocation.event).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Lambda-Runtime-Aws-Request-Id", invocation.request_id)
                self.send_header("Lambda-Runtime-Deadline-Ms", str(invocation.deadline_ms))
                self.send_header("Lambda-Runtime-Invoked-Function-Arn", api.function_arn)
                self.send_header(
                    "Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0"
                )
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.removeprefix(_PREFIX).strip("/").split("/")
                if parts == ["init", "error"]:
                    data = json.loads(body or b"{}")
                    api.init_error = InitError(
                        self.headers.get(
                            "Lambda-Runtime-Function-Error-Type", data.get("errorType", "")
                        ),
                        str(data.get("errorMessage", "")),
                    )
                    api.failed.set()
                    self._reply(202, {"status": "OK"})
                    return
                if len(parts) == 3 and parts[0] == "invocation" and parts[1] in api.by_id:
                    invocation = api.by_id[parts[1]]
                    invocation.finished = time.monotonic()
                    if parts[2] == "response":
                        invocation.result = json.loads(body) if body else None
                    else:
                        invocation.error = json.loads(body or b"{}")
                    invocation.done.set()
                    self._reply(202, {"status": "OK"})
                    return
                self._reply(404, {"errorMessage": f"no {self.path}"})

            def _reply(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


class FunctionFailedError(AssertionError):
    """The function could not start, or an invocation failed or did not answer in time."""


class FunctionInstance:
    """One Lambda execution environment: a runtime process polling its own Runtime API."""

    def __init__(
        self,
        *,
        name: str,
        arn: str,
        handler: str,
        task_root: Path,
        opt: Path,
        runtime_python: Path,
        runtime_dir: Path,
        environment: Mapping[str, str],
        timeout: float,
        memory: int,
        python_version: str,
        log: Path,
    ) -> None:
        self.name = name
        self.api = RuntimeApi(arn, timeout)
        self.log = log
        self._command = [str(runtime_python), "-m", "awslambdaric", handler]
        path = [
            str(task_root),
            str(opt / "python" / "lib" / f"python{python_version}" / "site-packages"),
            str(opt / "python"),
            str(runtime_dir),
        ]
        self._env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": str(task_root),
            "LAMBDA_RUNTIME_DIR": str(runtime_dir),
            "_HANDLER": handler,
            "AWS_LAMBDA_FUNCTION_NAME": name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "rehearsal",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_python{python_version}",
            "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "PYTHONPATH": os.pathsep.join(path),
            # /opt is read-only on Lambda: nothing compiled at run time may be kept.
            "PYTHONDONTWRITEBYTECODE": "1",
            **environment,
            "AWS_LAMBDA_RUNTIME_API": self.api.address,
        }
        self._cwd = task_root
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.spawned = 0.0

    def start(self) -> FunctionInstance:
        self.api.start()
        self._log_file = self.log.open("ab")
        self.spawned = time.monotonic()
        self._process = subprocess.Popen(
            self._command,
            cwd=self._cwd,
            env=self._env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        return self

    @property
    def init_seconds(self) -> float | None:
        """From spawning the process to its first poll for work (Lambda's Init Duration)."""
        return None if self.api.first_poll is None else self.api.first_poll - self.spawned

    def cpu_seconds(self) -> float | None:
        """CPU time the runtime process has used so far (user + system), from ``/proc``.

        Less sensitive than wall time to other work on a shared machine.
        """
        if self._process is None:
            return None
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def submit(self, event: Any) -> Invocation:
        """Queue ``event`` (an asynchronous invoke); ``wait`` for its answer."""
        invocation = Invocation(event)
        self.api.pending.put(invocation)
        return invocation

    def wait(self, invocation: Invocation, timeout: float = 120.0) -> Invocation:
        """Block until ``invocation`` is answered; a failure to start or answer raises."""
        deadline = time.monotonic() + timeout
        while not invocation.done.wait(0.05):
            if self.api.init_error is not None:
                raise FunctionFailedError(
                    f"{self.name} failed to start: {self.api.init_error.error_type}: "
                    f"{self.api.init_error.message}\n{self.output()[-2000:]}"
                )
            if self._process is not None and self._process.poll() is not None:
                raise FunctionFailedError(
                    f"{self.name} exited ({self._process.returncode}) before answering\n{self.output()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise FunctionFailedError(
                    f"{self.name} did not answer within {timeout} s\n{self.output()[-3000:]}"
                )
        return invocation

    def invoke(self, event: Any, timeout: float = 120.0) -> Any:
        """Invoke synchronously; returns the result, raises on a function error."""
        invocation = self.wait(self.submit(event), timeout)
        if invocation.error is not None:
            raise FunctionFailedError(
                f"{self.name} failed: {invocation.error.get('errorType')}: "
                f"{invocation.error.get('errorMessage')}\n{self.output()[-3000:]}"
            )
        return invocation.result

    def output(self) -> str:
        """What the function printed (its CloudWatch log stream)."""
        if self._log_file is not None:
            self._log_file.flush()
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.api.stop()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> FunctionInstance:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()
