"""A double of the ECS container agent's task scale-in protection endpoint, on 127.0.0.1.

``PUT {uri}/task-protection/v1/state`` with ``{"ProtectionEnabled": bool,
"ExpiresInMinutes": n}`` sets the protection and answers as the agent does
(``{"protection": {...}}``); ``GET`` returns it. Every call is recorded
(``calls``), so a test can say when the task was protected and whether it
still is. ``authorize`` decides whether a call is allowed (the rehearsal
asks the task role's IAM policy): a refused one gets the agent's
``AccessDeniedException`` error; ``not_in_service`` answers every call with
the ``TASK_NOT_VALID`` failure a task outside any service gets.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH = "/task-protection/v1/state"
TASK_ARN = "arn:aws:ecs:us-east-1:123456789012:task/pail-cluster/0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class ProtectionCall:
    """One PUT the agent received, and whether it was allowed."""

    enabled: bool
    minutes: int | None
    allowed: bool
    at: float
    """``time.monotonic()`` when it arrived."""


class EcsAgentDouble:
    """The endpoint; use as a context manager. ``uri`` is what ``ECS_AGENT_URI`` holds."""

    def __init__(
        self,
        *,
        authorize: Callable[[], bool] | None = None,
        not_in_service: bool = False,
        task_arn: str = TASK_ARN,
    ) -> None:
        self.authorize = authorize
        self.not_in_service = not_in_service
        self.task_arn = task_arn
        self.calls: list[ProtectionCall] = []
        self._lock = threading.Lock()
        self._expires_at: float | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def uri(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/api/task-1234"

    def protected(self) -> bool:
        """True while the last allowed PUT enabled protection and it has not expired."""
        with self._lock:
            return self._expires_at is not None and time.monotonic() < self._expires_at

    def allowed_calls(self) -> list[ProtectionCall]:
        with self._lock:
            return [call for call in self.calls if call.allowed]

    def states(self) -> list[bool]:
        """``ProtectionEnabled`` of every allowed PUT, in order."""
        return [call.enabled for call in self.allowed_calls()]

    def __enter__(self) -> EcsAgentDouble:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _put(self, body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return 400, {"error": {"Code": "InvalidParameterException", "Message": "bad JSON"}}
        enabled = request.get("ProtectionEnabled")
        minutes = request.get("ExpiresInMinutes", 120 if enabled else None)
        if not isinstance(enabled, bool) or (
            enabled and not (isinstance(minutes, int) and 1 <= minutes <= 2880)
        ):
            return 400, {"error": {"Code": "InvalidParameterException", "Message": str(request)}}
        allowed = not self.not_in_service and (self.authorize is None or self.authorize())
        with self._lock:
            self.calls.append(ProtectionCall(enabled, minutes, allowed, time.monotonic()))
            if allowed:
                self._expires_at = time.monotonic() + minutes * 60 if enabled else None
        if self.not_in_service:
            failure = {"Arn": self.task_arn, "Reason": "TASK_NOT_VALID", "Detail": None}
            return 200, {"failure": failure}
        if not allowed:
            message = "not authorized to perform: ecs:UpdateTaskProtection"
            return 400, {"error": {"Code": "AccessDeniedException", "Message": message}}
        return 200, {"protection": self._state()}

    def _state(self) -> dict[str, Any]:
        with self._lock:
            on = self._expires_at is not None and time.monotonic() < self._expires_at
        return {"ExpirationDate": None, "ProtectionEnabled": on, "TaskArn": self.task_arn}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if not self.path.endswith(PATH):
                    self._reply(404, {"error": {"Code": "NotFound", "Message": self.path}})
                    return
                self._reply(*agent._put(body))

            def do_GET(self) -> None:
                self._reply(200, {"protection": agent._state()})

            def _reply(self, status: int, data: dict[str, Any]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
