"""Who may use the dashboard: its secret host name, one-time access tokens, sessions, CSRF tokens.

``docs/operate.md`` ("Who can use the dashboard") is the threat model; in short:

* **A host name of its own.** The dashboard answers on
  ``http://<nonce>.localhost:PORT`` (browsers resolve every ``*.localhost``
  name to the loopback address themselves), where the nonce is 128 random
  bits of this process. Its session cookie is host-only (no ``Domain``), so
  the browser sends it to that host name and no other: a program on
  another loopback port (``http://127.0.0.1:OTHER``, ``http://localhost:OTHER``)
  never receives it, because browsers scope cookies by host name, not by
  port. Requests whose ``Host`` is not that name are refused (DNS
  rebinding), and the cookie is ``SameSite=Strict``, so a page on any other
  host name (``127.0.0.1`` included, which is another site) cannot make the
  browser send it either.
* **One-time, short-lived access tokens.** A token opens one session, once,
  within ``TOKEN_TTL`` seconds of being issued; a link opened twice, or
  late, opens nothing.
* **Sessions** live in this process's memory (a restart ends them all);
  the cookie has no ``Max-Age``, so the browser drops it when it closes.
* **CSRF.** Every form carries an HMAC of the session id under a secret of
  this process.

Tokens, sessions and CSRF values arrive as text from the network: they are
compared as bytes (``hmac.compare_digest`` refuses non-ASCII ``str``), and
tokens and sessions are looked up by their SHA-256, so that a lookup's time
says nothing about a secret.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable

TOKEN_TTL = 300.0
"""Seconds an access token can be redeemed after it was issued."""
MAX_PENDING_TOKENS = 100
"""Unredeemed tokens kept at most: the oldest is dropped first."""


def _bytes(text: str) -> bytes:
    # surrogatepass: a lone surrogate is a wrong value, not a crash.
    return text.encode("utf-8", "surrogatepass")


def _digest(text: str) -> bytes:
    return hashlib.sha256(_bytes(text)).digest()


class Access:
    """The dashboard's host name, its access tokens and its sessions (thread-safe).

    >>> access = Access(clock=lambda: 0.0)
    >>> token = access.issue_token()
    >>> session = access.redeem(token)
    >>> access.valid(session), access.redeem(token)
    (True, None)
    >>> access.csrf_ok(session, access.csrf(session)), access.csrf_ok(session, "é")
    (True, False)
    """

    def __init__(
        self, *, token_ttl: float = TOKEN_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.nonce = secrets.token_hex(16)
        """The random label of the dashboard's host name, ``<nonce>.localhost``."""
        self._secret = secrets.token_bytes(32)
        self._token_ttl = token_ttl
        self._clock = clock
        self._tokens: dict[bytes, float] = {}
        self._sessions: set[bytes] = set()
        self._lock = threading.Lock()

    def host(self, port: int) -> str:
        """The ``Host`` the dashboard answers to: ``<nonce>.localhost:port``."""
        return f"{self.nonce}.localhost:{port}"

    def host_ok(self, host: str, port: int) -> bool:
        """Whether a request's ``Host`` header names this dashboard (host names ignore case)."""
        return hmac.compare_digest(_bytes(host.lower()), _bytes(self.host(port)))

    def issue_token(self) -> str:
        """A new access token: it opens one session, once, within ``TOKEN_TTL`` seconds."""
        token = secrets.token_urlsafe(24)
        now = self._clock()
        with self._lock:
            self._drop_expired(now)
            while len(self._tokens) >= MAX_PENDING_TOKENS:
                self._tokens.pop(next(iter(self._tokens)))
            self._tokens[_digest(token)] = now + self._token_ttl
        return token

    def _drop_expired(self, now: float) -> None:
        for digest in [d for d, expiry in self._tokens.items() if expiry <= now]:
            del self._tokens[digest]

    def redeem(self, token: str) -> str | None:
        """A new session id for an unused, unexpired ``token`` (which is then spent), else None."""
        now = self._clock()
        with self._lock:
            expiry = self._tokens.pop(_digest(token), None)
            if expiry is None or expiry <= now:
                return None
            session = secrets.token_urlsafe(24)
            self._sessions.add(_digest(session))
        return session

    def valid(self, session: str | None) -> bool:
        """Whether ``session`` is a session this process opened."""
        if session is None:
            return False
        with self._lock:
            return _digest(session) in self._sessions

    def csrf(self, session: str) -> str:
        """The CSRF token of ``session``'s forms."""
        return hmac.new(self._secret, _bytes(session), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str, value: str) -> bool:
        """Whether a form's ``value`` is ``session``'s CSRF token (bytes compared in constant time)."""
        return hmac.compare_digest(_bytes(value), _bytes(self.csrf(session)))
