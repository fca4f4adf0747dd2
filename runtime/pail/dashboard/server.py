"""The dashboard's HTTP server: 127.0.0.1 only, one operator, no GET side effects.

* **Access** (``access``, and the threat model in docs/operate.md). The
  dashboard answers on its own host name, ``http://<nonce>.localhost:PORT``,
  with a host-only, ``HttpOnly``, ``SameSite=Strict`` session cookie: a
  program on another loopback port never receives it. ``link()`` gives a
  one-time link whose access token opens one session within
  ``access.TOKEN_TTL`` seconds; every other page needs that session. Other
  users of the machine can reach 127.0.0.1 too, so no page is served
  without it.
* **CSRF.** Every action is a ``POST`` whose form carries a token derived
  from the session (HMAC of the session id with a secret of this process);
  a ``POST`` without it, or from another ``Origin``, is refused (403).
* **DNS rebinding.** A request whose ``Host`` is not the dashboard's is
  refused; the name is secret, so a rebound domain cannot be it.
* **The status page** (``/status-page``) is served on ``127.0.0.1:PORT``,
  not on the dashboard's host name, and without a session: it is a public
  file that reads presigned URLs from its fragment, so it shares no origin
  and no cookie with the action forms. It has its own strict policy
  (``status_page.page_csp``: its inline script by hash, fetches to the
  bucket's endpoint only).
* Every page has a strict Content-Security-Policy (scripts and styles from
  this server only) and ``no-store``.
"""

from __future__ import annotations

import logging
import re
from html import escape
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from pail.dashboard import limits_form, search_view, views
from pail.dashboard.access import Access
from pail.dashboard.model import Dashboard
from pail.errors import ConfigurationError, JobNotFoundError, ObjectTooLargeError, PailError
from pail.ids import validate_job_id
from pail.keys import validate_namespace
from pail.operate.objects import JobKind
from pail.operate.queues import queue_label
from pail.operate.search import SearchPage
from pail.protocol.schedules.definition import validate_name
from pail.serving import BackgroundServer, QuietThreadingServer
from pail.status_page import ANY_ENDPOINT, endpoint_origin, page_csp, page_html, status_page_url

log = logging.getLogger("pail.dashboard")

LOOPBACK = "127.0.0.1"
COOKIE = "pail_dashboard"
MAX_FORM_BYTES = 64 * 1024
STATIC = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class _NotFoundError(Exception):
    pass


class _ForbiddenError(Exception):
    pass


def _static(name: str) -> bytes:
    return resources.files("pail.dashboard").joinpath("static", name).read_bytes()


def _namespace(slug: str) -> str:
    if slug == views.DEFAULT_QUEUE_SLUG:
        return ""
    try:
        validate_namespace(slug)
    except ValueError as exc:
        raise _NotFoundError(str(exc)) from None
    return slug


def _job_id(text: str) -> str:
    try:
        return validate_job_id(unquote(text), stored=True)  # a quarantined '!x' letter too
    except ConfigurationError as exc:
        raise _NotFoundError(str(exc)) from None


def _schedule_name(text: str) -> str:
    try:
        return validate_name(unquote(text))
    except ConfigurationError as exc:
        raise _NotFoundError(str(exc)) from None


def _landing_page(target: str) -> str:
    """The answer to a link's token: a page that moves on to ``target`` by itself.

    Not a 303: a link opened from another site (the ``--open`` redirect file,
    a link in a chat) starts a cross-site navigation, and a browser sends no
    ``SameSite=Strict`` cookie anywhere along its redirects, so the page after
    a 303 would find no session. This page's own refresh is a navigation the
    dashboard's origin starts: the cookie goes with it. The address loses the
    token at once either way.
    """
    href = escape(target, quote=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={href}"><title>pail dashboard</title>'
        '<link rel="stylesheet" href="/static/dashboard.css"></head><body><main id="main">'
        f'<p>Session opened. <a href="{href}" id="continue">Continue to the dashboard</a>.</p>'
        "</main></body></html>"
    )


def _too_large_page(frame: views.Frame, job_id: str, exc: ObjectTooLargeError) -> str:
    """The job page when the job's record is over ``model.MAX_READ``: its size, not its bytes."""
    message = (
        f"The record {exc.key} is {exc.size:,} bytes, more than the dashboard reads "
        f"({exc.limit:,}): it was not read, so the job's state is not shown here."
    )
    return views.layout(
        frame, f"Job {job_id}", f'<p class="warn" id="too-large">{escape(message)}</p>'
    )


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    # -- plumbing ---------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        sent = {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "X-Frame-Options": "DENY",
            **(headers or {}),  # a page may set its own policy: one header each, never two
        }
        for name, value in sent.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._send(
            status,
            text.encode(),
            "text/html; charset=utf-8",
            {"Content-Security-Policy": CSP, **(headers or {})},
        )

    def _redirect(self, location: str, headers: dict[str, str] | None = None) -> None:
        self._send(303, b"", "text/plain", {"Location": location, **(headers or {})})

    def _session_id(self) -> str | None:
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed Cookie header is no session
            return None
        morsel = cookie.get(COOKIE)
        return morsel.value if morsel is not None else None

    def _port(self) -> int:
        return int(self.server.server_address[1])

    def _on_dashboard_host(self) -> bool:
        return self.server.access.host_ok(self.headers.get("Host", ""), self._port())

    def _on_loopback_host(self) -> bool:
        port = self._port()
        return self.headers.get("Host", "").lower() in (f"{LOOPBACK}:{port}", f"localhost:{port}")

    def _frame(self, session: str) -> views.Frame:
        board = self.server.board
        return views.Frame(
            board.bucket,
            board.interval,
            board.requests_last_minute(),
            self.server.access.csrf(session),
            board.max_pages,
        )

    # -- entry points -------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        if path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        if self._on_loopback_host():
            # 127.0.0.1:PORT serves the public status page only: no session, no cookie.
            if method == "GET" and path == "/status-page":
                html = page_html()
                self._send(
                    200,
                    html,
                    "text/html; charset=utf-8",
                    {
                        "Content-Security-Policy": page_csp(html, self.server.connect_src()),
                        "Referrer-Policy": "no-referrer",
                    },
                )
                return
            self._html(
                403,
                views.error_page(
                    None,
                    403,
                    "Open the link that `pail dashboard` printed: the dashboard answers on its own host name.",
                ),
            )
            return
        if not self._on_dashboard_host():
            self._html(
                403,
                views.error_page(
                    None, 403, "This dashboard answers on the host name of its link only."
                ),
            )
            return
        if method == "GET" and path.startswith("/static/"):
            name = path.removeprefix("/static/")
            if name not in STATIC:
                self._html(404, views.error_page(None, 404, "No such file."))
                return
            self._send(200, _static(name), STATIC[name])
            return
        access = self.server.access
        session = self._session_id()
        if not access.valid(session):
            session = None
        token = query.get("token", [""])[0]
        if method == "GET" and token:
            rest = {k: v for k, v in query.items() if k != "token"}
            # Only a path of this server: "//host/..." would send the browser elsewhere.
            local = path.startswith("/") and not path.startswith("//") and "\\" not in path
            target = (path if local else "/") + (f"?{urlencode(rest, doseq=True)}" if rest else "")
            opened = access.redeem(token) if session is None else None
            if opened is not None:
                cookie = f"{COOKIE}={opened}; HttpOnly; SameSite=Strict; Path=/"
                self._html(200, _landing_page(target), {"Set-Cookie": cookie})
                return
            if session is not None:
                # A used link reopened in a browser that has a session: drop the token.
                self._html(200, _landing_page(target))
                return
        if session is None:
            self._html(
                403,
                views.error_page(
                    None,
                    403,
                    "This page needs a session: open a link that `pail dashboard` printed. "
                    "Its access token opens one session, once, within a few minutes; "
                    "press Enter in its terminal for a new link.",
                ),
            )
            return
        assert session is not None
        try:
            if method == "POST":
                self._post(path, session)
            else:
                self._get(path, query, session)
        except _NotFoundError as exc:
            self._html(404, views.error_page(self._frame(session), 404, str(exc) or "Not found."))
        except _ForbiddenError as exc:
            self._html(403, views.error_page(self._frame(session), 403, str(exc)))
        except PailError as exc:
            # The bucket said no (denied, missing, unreachable): a page that says so.
            self._html(
                502, views.error_page(self._frame(session), 502, f"The bucket answered: {exc}")
            )
        except Exception as exc:
            log.exception("dashboard page %s failed", path)
            self._html(
                500, views.error_page(self._frame(session), 500, f"{type(exc).__name__}: {exc}")
            )

    # -- pages --------------------------------------------------------------------

    def _get(self, path: str, query: dict[str, list[str]], session: str) -> None:
        board = self.server.board

        def one(name: str) -> str | None:
            values = query.get(name)
            return values[0] if values else None

        if path == "/":
            found = board.queues()
            rows = [(ns, board.snapshot(ns).census) for ns in found.queues]
            paused = [ns for ns in found.queues if board.pause_state(ns) is not None]
            self._html(
                200,
                views.overview(self._frame(session), rows, found.foreign, found.exact, paused),
            )
            return
        match = re.fullmatch(r"/q/([^/]+)(/.*)?", path)
        if match is None:
            raise _NotFoundError("No such page.")
        namespace, rest = _namespace(match.group(1)), match.group(2) or ""
        if rest == "":
            view = board.queue_view(namespace)
            html = views.queue_page(self._frame(session), view)
            notice = views.notice_text(one("notice"), one("id"), one("n"))
            if notice:
                html = html.replace(
                    "</h1>\n",
                    f'</h1>\n<div class="notice" role="status" id="notice">{escape(notice)}</div>\n',
                    1,
                )
            self._html(200, html)
        elif rest == "/pause":
            self._html(
                200,
                views.confirm_page(
                    self._frame(session),
                    namespace,
                    title=f"Pause {queue_label(namespace)}",
                    question=f"Pause {queue_label(namespace)}? Workers stop claiming at their next page refill; running jobs finish. Jobs can still be enqueued.",
                    action=f"{views.queue_path(namespace)}/pause",
                    button="Pause the queue",
                    fields={},
                    back=views.queue_path(namespace),
                    reason="Reason (optional, shown to whoever looks next):",
                ),
            )
        elif rest == "/resume":
            self._html(
                200,
                views.confirm_page(
                    self._frame(session),
                    namespace,
                    title=f"Resume {queue_label(namespace)}",
                    question=f"Resume {queue_label(namespace)}? Workers claim jobs again at their next page refill or poll.",
                    action=f"{views.queue_path(namespace)}/resume",
                    button="Resume the queue",
                    fields={},
                    back=views.queue_path(namespace),
                ),
            )
        elif rest == "/jobs":
            try:
                kind = JobKind(one("state") or JobKind.PENDING.value)
            except ValueError:
                raise _NotFoundError("No such state.") from None
            page = board.jobs(namespace, kind, after=one("after"))
            self._html(
                200,
                views.jobs_page(self._frame(session), namespace, page, dlq=kind is JobKind.DEAD),
            )
        elif rest == "/search":
            form = search_view.SearchForm.from_query(query)
            results: SearchPage | None = None
            problem: str | None = None
            if form.asked or form.after:
                try:
                    results = board.search(namespace, **form.arguments())
                except ConfigurationError as exc:
                    problem = str(exc)
            html = search_view.search_page(self._frame(session), namespace, form, results, problem)
            self._html(400 if problem else 200, html)
        elif rest == "/dlq":
            page = board.jobs(namespace, JobKind.DEAD, after=one("after"))
            notice = views.notice_text(one("notice"), one("id"), one("n"))
            html = views.jobs_page(self._frame(session), namespace, page, dlq=True)
            if notice:
                html = html.replace(
                    "</h1>\n",
                    f'</h1>\n<div class="notice" role="status" id="notice">{escape(notice)}</div>\n',
                    1,
                )
            self._html(200, html)
        elif rest == "/schedules":
            schedules = board.schedules(namespace, after=one("after"))
            notice = views.notice_text(one("notice"), one("id"), None)
            html = views.schedules_page(self._frame(session), schedules)
            if notice:
                html = html.replace(
                    "</h1>\n",
                    f'</h1>\n<div class="notice" role="status" id="notice">{escape(notice)}</div>\n',
                    1,
                )
            self._html(200, html)
        elif (m := re.fullmatch(r"/schedules/([^/]+)/(pause|resume)", rest)) is not None:
            name, verb = _schedule_name(m.group(1)), m.group(2)
            what = (
                "No tick is due while it is paused: the reaper's passes enqueue nothing for it."
                if verb == "pause"
                else "The ticks that fell while it was paused are not enqueued; the next one is."
            )
            self._html(
                200,
                views.confirm_page(
                    self._frame(session),
                    namespace,
                    title=f"{verb.capitalize()} schedule {name}",
                    question=f"{verb.capitalize()} schedule {name} of {queue_label(namespace)}? {what}",
                    action=f"{views.schedule_path(namespace, name)}/{verb}",
                    button=f"{verb.capitalize()} the schedule",
                    fields={},
                    back=views.schedules_path(namespace),
                    crumbs=[(views.schedules_path(namespace), "Schedules")],
                ),
            )
        elif rest == "/redrive-all":
            self._html(
                200,
                views.confirm_page(
                    self._frame(session),
                    namespace,
                    title="Redrive every dead letter",
                    question=f"Send every dead-lettered job of {queue_label(namespace)} back to the queue with fresh retries?",
                    action=f"{views.queue_path(namespace)}/redrive-all",
                    button="Redrive all",
                    fields={},
                    back=f"{views.queue_path(namespace)}/dlq",
                ),
            )
        elif (m := re.fullmatch(r"/dlq/([^/]+)", rest)) is not None:
            job_id = _job_id(m.group(1))
            letter = board.letter(namespace, job_id)
            if letter is None:
                raise _NotFoundError(f"No dead letter {job_id} in this queue.")
            self._html(200, views.letter_page(self._frame(session), namespace, letter))
        elif (m := re.fullmatch(r"/dlq/([^/]+)/delete", rest)) is not None:
            job_id = _job_id(m.group(1))
            letter = board.letter(namespace, job_id)
            if letter is None:
                raise _NotFoundError(f"No dead letter {job_id} in this queue.")
            self._html(
                200,
                views.confirm_page(
                    self._frame(session),
                    namespace,
                    title=f"Delete dead letter {job_id}",
                    question=f"Delete the dead letter of job {job_id}? Its payload and error are lost; the job stays failed.",
                    action=f"{views.letter_path(namespace, job_id)}/delete",
                    button="Delete dead letter",
                    fields={"etag": letter.etag},
                    back=views.letter_path(namespace, job_id),
                ),
            )
        elif (m := re.fullmatch(r"/job/([^/]+)", rest)) is not None:
            job_id = _job_id(m.group(1))
            try:
                status = board.status(namespace, job_id)
            except ObjectTooLargeError as exc:
                self._html(200, _too_large_page(self._frame(session), job_id, exc))
                return
            lease = (
                board.lease(namespace, job_id)
                if status is not None and status.state.value == "running"
                else None
            )
            urls = board.pail(namespace).status_urls(job_id, 3600)
            link = status_page_url(f"http://{LOOPBACK}:{self._port()}/status-page", job_id, urls)
            self._html(
                200, views.job_page(self._frame(session), namespace, job_id, status, lease, link)
            )
        else:
            raise _NotFoundError("No such page.")

    # -- actions ------------------------------------------------------------------

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            raise _ForbiddenError("The form is too large.")
        data = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        return {k: v[0] for k, v in parse_qs(data).items()}

    def _post(self, path: str, session: str) -> None:
        form = self._form()
        origin = self.headers.get("Origin")
        if origin is not None and origin != f"http://{self.server.access.host(self._port())}":
            raise _ForbiddenError("A request from another site was refused.")
        if not self.server.access.csrf_ok(session, form.get("csrf", "")):
            raise _ForbiddenError(
                "The form's session token is missing or stale: reload the page and try again."
            )
        board = self.server.board
        match = re.fullmatch(r"/q/([^/]+)(/.*)", path)
        if match is None:
            raise _NotFoundError("No such action.")
        namespace, rest = _namespace(match.group(1)), match.group(2)
        back = f"{views.queue_path(namespace)}/dlq"
        if rest == "/pause":
            notice = "paused" if board.pause(namespace, form.get("reason")) else "already-paused"
            self._redirect(f"{views.queue_path(namespace)}?{urlencode({'notice': notice})}")
        elif rest == "/resume":
            notice = "resumed" if board.resume(namespace) else "not-paused"
            self._redirect(f"{views.queue_path(namespace)}?{urlencode({'notice': notice})}")
        elif rest == "/limits":
            self._limits(namespace, form, session)
        elif (m := re.fullmatch(r"/schedules/([^/]+)/(pause|resume)", rest)) is not None:
            name, verb = _schedule_name(m.group(1)), m.group(2)
            outcome = board.pause_schedule(namespace, name, paused=verb == "pause")
            notice = f"schedule-{verb}d" if outcome == "changed" else f"schedule-{outcome}"
            query = urlencode({"notice": notice, "id": name})
            self._redirect(f"{views.schedules_path(namespace)}?{query}")
        elif rest == "/redrive-all":
            done = board.redrive_all(namespace)
            self._redirect(f"{back}?{urlencode({'notice': 'redriven-all', 'n': len(done)})}")
        elif (m := re.fullmatch(r"/dlq/([^/]+)/redrive", rest)) is not None:
            job_id = _job_id(m.group(1))
            try:
                notice = "redriven" if board.redrive(namespace, job_id) else "not-redriven"
            except JobNotFoundError:
                notice = "gone"
            self._redirect(f"{back}?{urlencode({'notice': notice, 'id': job_id})}")
        elif (m := re.fullmatch(r"/dlq/([^/]+)/delete", rest)) is not None:
            job_id = _job_id(m.group(1))
            try:
                notice = (
                    "deleted"
                    if board.delete_letter(namespace, job_id, form.get("etag", ""))
                    else "changed"
                )
            except JobNotFoundError:
                notice = "gone"
            self._redirect(f"{back}?{urlencode({'notice': notice, 'id': job_id})}")
        else:
            raise _NotFoundError("No such action.")

    def _limits(self, namespace: str, form: dict[str, str], session: str) -> None:
        """A limit form: refused with a notice, asked to confirm, or (``confirm=yes``) made."""
        page = views.queue_path(namespace)
        try:
            change = limits_form.parse(form)
        except limits_form.BadLimitError as exc:
            self._redirect(f"{page}?{urlencode({'notice': exc.code})}")
            return
        if form.get("confirm") != "yes":
            self._html(200, views.limits_confirm_page(self._frame(session), namespace, change))
            return
        try:
            changed = self.server.board.change_limit(namespace, change)
        except ConfigurationError:  # checked already, but for the group count the bucket holds
            notice, value = "limit-full", ""
        else:
            notice, value = change.notice() if changed else ("no-limits", "")
        self._redirect(f"{page}?{urlencode({'notice': notice, 'id': change.scope, 'n': value})}")


class _Server(QuietThreadingServer):
    def __init__(self, address: tuple[str, int], board: Dashboard, access: Access) -> None:
        super().__init__(address, _Handler)
        self.board = board
        self.access = access
        self._connect_src: str | None = None

    def connect_src(self) -> str:
        """The bucket endpoint's origin, where the status page may fetch (presigned locally)."""
        if self._connect_src is None:
            origin = endpoint_origin(self.board.store.presign_get("_pail/status-page", 60))
            self._connect_src = origin if origin is not None else ANY_ENDPOINT
        return self._connect_src


class DashboardServer(BackgroundServer[_Server]):
    """Serves a ``Dashboard`` on 127.0.0.1 from a background thread.

    >>> with DashboardServer(Dashboard(store)) as server:  # doctest: +SKIP
    ...     print(server.link())
    http://3f9c...e1.localhost:53124/?token=...
    """

    def __init__(self, board: Dashboard, *, port: int = 0, access: Access | None = None) -> None:
        super().__init__("pail-dashboard")
        self.board = board
        self.access = access if access is not None else Access()
        """Its host name, tokens and sessions (a test may pass one with its own clock)."""
        self._port = port

    def bind(self) -> _Server:
        return _Server((LOOPBACK, self._port), self.board, self.access)

    @property
    def port(self) -> int:
        """The port it listens on (on 127.0.0.1)."""
        return int(self.server.server_address[1])

    @property
    def host(self) -> str:
        """The ``Host`` it answers to: ``<nonce>.localhost:port``."""
        return self.access.host(self.port)

    @property
    def origin(self) -> str:
        """``http://<nonce>.localhost:port``: the dashboard's own origin (no session in it)."""
        return f"http://{self.host}"

    @property
    def status_page_origin(self) -> str:
        """``http://127.0.0.1:port``: the status page's origin, for the bucket's CORS rule."""
        return f"http://{LOOPBACK}:{self.port}"

    def link(self) -> str:
        """A new one-time link: its access token opens one session within ``access.TOKEN_TTL`` s."""
        return f"{self.origin}/?token={quote(self.access.issue_token())}"
