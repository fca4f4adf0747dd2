"""ECS task scale-in protection: a Fargate task protects itself while it runs a job.

ECS chooses which tasks a scale-in (or a deployment) stops, and knows
nothing of jobs: a task 40 minutes into an hour-long export would get
SIGTERM, give its lease back, and the job would start over. A task can
mark itself protected through its container agent's endpoint
(``$ECS_AGENT_URI/task-protection/v1/state``, which calls
``UpdateTaskProtection`` with the task role's credentials): ECS then stops
it neither for a scale-in nor for a deployment until the protection is
removed or expires. The runner (``pail work``, ``work-once``):

* **protects** the task as soon as a claim gives it a job, before the
  handler starts: ``PUT {"ProtectionEnabled": true, "ExpiresInMinutes": N}``;
* **renews** it while jobs run, on the lease's schedule: every
  ``visibility_timeout / 3`` it looks, and sends the PUT again once half of
  ``N`` has passed, so the protection never lapses under a running job;
* **removes** it (``{"ProtectionEnabled": false}``) when a claim finds the
  queue empty (the task is idle: a scale-in may take it) and when the run
  ends, however it ends (the queue drained, SIGTERM, a storage error, a
  handler that raised or hung).

``N`` (``expires_minutes``) is the visibility timeout times three, in whole
minutes, at least 2 (2 at the default 30 s): longer than a lease renewal,
so a renewal or two may fail before it lapses, and short enough that a
task whose process died holding it is protected for minutes, not the
agent's default two hours.

Outside ECS (no ``ECS_AGENT_URI``), or with ``PAIL_TASK_PROTECTION=false``,
nothing is requested. A call that fails (the agent down, an error in its
answer) is logged and never stops the worker: the job runs unprotected, as
it would have before. An answer that says it can never work (the task role
may not call ``ecs:UpdateTaskProtection``, or the task belongs to no service:
``TASK_NOT_VALID``, as a ``RunTask`` task) turns protection off for the rest
of the run, with one warning.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import TypeVar

from pail.config import ENV_ECS_AGENT_URI, ENV_TASK_PROTECTION, parse_flag, resolve

log = logging.getLogger("pail.runner")

PATH = "/task-protection/v1/state"
"""The agent's task scale-in protection endpoint, under ``$ECS_AGENT_URI``."""
MIN_EXPIRES_MINUTES = 2
MAX_EXPIRES_MINUTES = 2880
"""ECS's bounds are 1 minute to 48 hours; a minute would lapse between two looks at it."""
AGENT_TIMEOUT = 2.0
"""Seconds an agent call may take: it answers from the task's own host."""
REFUSALS = ("AccessDenied", "TASK_NOT_VALID", "UnauthorizedOperation")
"""Words in an agent's answer that mean no later call can succeed either."""

T = TypeVar("T")

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""An opener that ignores HTTP_PROXY: the agent is on the task's own host, never behind a proxy."""


def expires_minutes(visibility_timeout: float) -> int:
    """The protection's lifetime for a queue's visibility timeout: 3 leases, in minutes, at least 2.

    >>> expires_minutes(30), expires_minutes(600), expires_minutes(1e9)
    (2, 30, 2880)
    """
    minutes = math.ceil(3 * visibility_timeout / 60)
    return min(MAX_EXPIRES_MINUTES, max(MIN_EXPIRES_MINUTES, minutes))


class AgentError(Exception):
    """The agent did not set the protection: ``refused`` if no later call can work either."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def put_state(uri: str, enabled: bool, minutes: int, *, timeout: float = AGENT_TIMEOUT) -> None:
    """One PUT to the agent's endpoint; ``AgentError`` unless it set the protection asked for."""
    body: dict[str, object] = {"ProtectionEnabled": enabled}
    if enabled:
        body["ExpiresInMinutes"] = minutes
    request = urllib.request.Request(
        uri.rstrip("/") + PATH,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    try:
        with _DIRECT.open(request, timeout=timeout) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    except (OSError, ValueError) as exc:  # unreachable, timed out, not a URL
        raise AgentError(f"the ECS agent did not answer: {exc}") from exc
    problem = _problem(text)
    if status == 200 and problem is None:
        return
    detail = problem or f"HTTP {status}"
    raise AgentError(
        f"the ECS agent refused: {detail}", refused=any(word in detail for word in REFUSALS)
    )


def _problem(text: bytes) -> str | None:
    """The ``error`` or ``failure`` an agent's answer carries, as text; None for a plain success."""
    try:
        data = json.loads(text or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError):
        return f"an answer that is not JSON: {text[:200]!r}"
    if not isinstance(data, dict):
        return f"an answer that is not an object: {text[:200]!r}"
    for field in ("error", "failure"):
        found = data.get(field)
        if found:
            if isinstance(found, dict):
                words = [str(v) for k, v in sorted(found.items()) if k != "Arn" and v]
                return f"{field}: " + ", ".join(words)[:500]
            return f"{field}: {str(found)[:500]}"
    return None


class TaskProtection:
    """The task's scale-in protection, set while it holds a job; see the module docstring.

    Thread-safe. ``protect`` and ``release`` never raise: a failure is logged.
    ``check_every``: seconds between two looks at the protection while it is
    on; ``renew_after``: its age when it is sent again (default: half its
    lifetime). ``calls`` counts the PUTs sent.
    """

    def __init__(
        self,
        agent_uri: str,
        *,
        expires_minutes: int,
        check_every: float,
        renew_after: float | None = None,
        send: Callable[[str, bool, int], None] | None = None,
    ) -> None:
        self._uri = agent_uri
        self._minutes = expires_minutes
        self._check_every = check_every
        self._renew_after = expires_minutes * 30.0 if renew_after is None else renew_after
        """Seconds after which a protection is sent again: half its lifetime."""
        self._send = send or put_state
        self._lock = threading.Lock()
        self._set_at: float | None = None
        """When the protection last took effect (monotonic); None while it is surely off."""
        self._maybe_on = False
        """True from a protecting PUT's sending until a clearing PUT succeeded."""
        self._refused = False
        self._warned = False
        self._stop = threading.Event()
        self._stop.set()  # set: no renewal runs (none started, or the last one was released)
        self._renewer: threading.Thread | None = None
        self.calls = 0

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None,
        *,
        visibility_timeout: float,
        enabled: bool | None = None,
    ) -> TaskProtection | None:
        """The protection of an ECS task (``ECS_AGENT_URI`` set and ``PAIL_TASK_PROTECTION`` on), else None.

        >>> TaskProtection.from_env({}, visibility_timeout=30) is None
        True
        """
        uri = resolve(None, ENV_ECS_AGENT_URI, env, default="", parse=lambda text, _: text)
        if not uri or not resolve(
            enabled, ENV_TASK_PROTECTION, env, default=True, parse=parse_flag
        ):
            return None
        return cls(
            uri,
            expires_minutes=expires_minutes(visibility_timeout),
            check_every=visibility_timeout / 3,
        )

    @property
    def expires_in_minutes(self) -> int:
        return self._minutes

    @property
    def protected(self) -> bool:
        """True while the last request this task made protects it (as far as it knows)."""
        with self._lock:
            return self._set_at is not None

    def claiming(self, claim: Callable[[], T | None]) -> Callable[[], T | None]:
        """``claim``, protecting the task when it gives a job and releasing it when it finds none."""

        def claim_and_protect() -> T | None:
            job = claim()
            if job is None:
                self.release()
            else:
                self.protect()
            return job

        return claim_and_protect

    def protect(self) -> None:
        """Protect the task now if it is not, and keep it protected until ``release``."""
        with self._lock:
            if self._refused or self._set_at is not None:
                return
            self._put(True)
            if self._stop.is_set() and not self._refused:
                # A renewal of its own: one released earlier may not have woken up yet.
                self._stop = stop = threading.Event()
                self._renewer = threading.Thread(
                    target=self._renew, args=(stop,), name="pail-task-protection", daemon=True
                )
                self._renewer.start()

    def release(self) -> None:
        """Drop the protection (one PUT) if a request may have set it; nothing otherwise."""
        with self._lock:
            self._stop.set()
            if self._maybe_on and not self._refused:
                self._put(False)

    def close(self) -> None:
        """``release``, and wait for the renewal thread: what the runner does on its way out."""
        self.release()
        renewer = self._renewer
        if renewer is not None and renewer is not threading.current_thread():
            renewer.join(timeout=self._check_every + AGENT_TIMEOUT)

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(self._check_every):
            with self._lock:
                if stop.is_set() or self._refused:
                    return
                # Again once half its life has passed; at once after a failed PUT.
                if self._set_at is None or time.monotonic() - self._set_at >= self._renew_after:
                    self._put(True)

    def _put(self, enabled: bool) -> None:
        """Send one PUT (the lock held) and record what it did; log what failed."""
        if enabled:
            self._maybe_on = True
        self.calls += 1
        try:
            self._send(self._uri, enabled, self._minutes)
        except AgentError as exc:
            self._failed(enabled, exc)
            return
        if enabled:
            self._set_at = time.monotonic()
        else:
            self._set_at, self._maybe_on = None, False

    def _failed(self, enabled: bool, exc: AgentError) -> None:
        if exc.refused:
            self._refused = True
            self._set_at = None
            log.warning(
                "ECS task scale-in protection is off for this run: %s (the task role needs "
                "ecs:UpdateTaskProtection, and the task must belong to a service)",
                exc,
            )
            return
        if not enabled:
            # Still on, maybe: it expires within its lifetime; close() asks once more.
            log.warning("could not remove the ECS task scale-in protection: %s", exc)
            return
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(
            level,
            "could not set the ECS task scale-in protection; the job runs unprotected: %s",
            exc,
        )
