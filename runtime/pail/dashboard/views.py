"""The dashboard's HTML, rendered on the server: plain forms and links, no build step.

Everything read from the bucket is foreign bytes, so every value goes
through ``html.escape`` (``_e``) and every id in a URL through ``quote``.
Actions are ``<button>``s in ``POST`` forms that carry the session's CSRF
token; destructive ones go through a confirmation page first. Regions that
refresh in place carry ``data-live`` and a stable ``id`` (``dashboard.js``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from pail.codec import ErrorInfo
from pail.dashboard import limits_form
from pail.dashboard.chart import throughput_svg
from pail.dashboard.limits_form import Kind, LimitChange
from pail.dashboard.model import QueueView, ScheduleRow, SchedulesView
from pail.operate.dead_letters import Letter
from pail.operate.failures import Failure
from pail.operate.jobs import JobPage, JobRow
from pail.operate.objects import JobKind
from pail.operate.queues import queue_label
from pail.operate.snapshot import Census, Count
from pail.operate.text import duration, one_line
from pail.protocol.limits.config import MAX_CONCURRENCY, MAX_GROUP_OVERRIDES
from pail.protocol.limits.gate import REFRESH
from pail.protocol.limits.rate import MAX_RATE
from pail.protocol.pause import PauseState
from pail.stats import OLDEST_PENDING, STATES
from pail.status import JobStatus

DEFAULT_QUEUE_SLUG = "_"
"""The default queue's name in URLs: no namespace can be ``_`` (they start with a letter or digit)."""

STATE_LABELS: dict[JobKind, str] = {
    JobKind.PENDING: "pending",
    JobKind.DELAYED: "delayed",
    JobKind.WAITING: "waiting",
    JobKind.RUNNING: "running",
    JobKind.DONE: "done",
    JobKind.DEAD: "dead-lettered",
    JobKind.CANCELLED: "cancelled",
}

_LIMITS_FOLLOW = (
    f"Workers follow it within {REFRESH:g} s of their next claim; running jobs are not stopped."
)

NOTICES = {
    "redriven": "Job {id} was sent back to the queue.",
    "not-redriven": "Job {id} was not dead-lettered any more: nothing to redrive.",
    "redriven-all": "{n} job(s) were sent back to the queue.",
    "deleted": "Dead letter {id} was deleted. The job stays failed.",
    "changed": "Dead letter {id} changed since you inspected it: nothing deleted. Look again.",
    "gone": "Dead letter {id} is gone already.",
    "paused": "The queue is paused: workers claim nothing from their next page refill.",
    "already-paused": "The queue was paused already.",
    "resumed": "The queue was resumed: workers claim again at their next refill.",
    "not-paused": "The queue was not paused.",
    "schedule-paused": "Schedule {id} is paused: no tick is due until it is resumed.",
    "schedule-resumed": "Schedule {id} was resumed: the ticks that fell while it was paused are not enqueued.",
    "schedule-unchanged": "Schedule {id} was in that state already.",
    "schedule-gone": "There is no schedule {id} any more.",
    "schedule-unreadable": "Schedule {id} is unreadable: remove it and add it again (`pail schedule remove`).",
    "concurrency-set": f"Concurrency limit set: {{id}} runs at most {{n}} job(s) at once. {_LIMITS_FOLLOW}",
    "concurrency-removed": "The concurrency limit of {id} was removed.",
    "rate-set": f"Rate limit set: {{id}} starts at most {{n}} job(s). {_LIMITS_FOLLOW}",
    "rate-removed": "The rate limit of {id} was removed.",
    "limits-cleared": "Every limit of the queue was removed: concurrency and rates, queue-wide and per group.",
    "no-limits": "The queue had no limits: nothing removed.",
    "concurrency-invalid": f"Nothing changed: a concurrency limit is a whole number from 1 to {MAX_CONCURRENCY}, or empty (or none) to remove it.",
    "concurrency-zero": "Nothing changed: a limit of 0 would stop every claim. To stop claiming, pause the queue; to remove the limit, leave the value empty.",
    "rate-invalid": f"Nothing changed: a rate is COUNT/PERIOD, 1 to {MAX_RATE} starts per 1 s to a day (10/s, 5/2s, 100/min, 1000/h), or empty (or none) to remove it.",
    "limit-bad-group": "Nothing changed: the group is empty (the queue's own limit), * (every group without one of its own) or a group's name: 1 to 64 letters, digits and _.:-, starting with a letter or digit.",
    "limit-too-long": f"Nothing changed: a value or a group is at most {limits_form.MAX_VALUE} characters.",
    "limit-bad-form": "Nothing changed: the form named no limit to change. Reload the page and try again.",
    "limit-full": f"Nothing changed: {MAX_GROUP_OVERRIDES} groups have limits of their own already, the most a queue keeps. Remove one first.",
}


MAX_SHOWN = 20_000
"""Characters of one value a page shows at most (a message, a traceback, a payload, raw
bytes): the bucket's writers choose them, and a page must stay a page."""


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """``text``, cut at ``limit`` characters with a note of how much was left out.

    >>> clip("abcdef", 3)
    'abc… (3 more characters not shown)'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters not shown)"


def _e(value: Any) -> str:
    # Every value a page shows goes through here: escaped, and never longer than MAX_SHOWN.
    return escape(clip(str(value)), quote=True)


def queue_slug(namespace: str) -> str:
    return namespace or DEFAULT_QUEUE_SLUG


def queue_path(namespace: str) -> str:
    return f"/q/{queue_slug(namespace)}"


def job_path(namespace: str, job_id: str) -> str:
    return f"{queue_path(namespace)}/job/{quote(job_id, safe='')}"


def letter_path(namespace: str, job_id: str) -> str:
    return f"{queue_path(namespace)}/dlq/{quote(job_id, safe='')}"


def schedules_path(namespace: str, after: str | None = None) -> str:
    query = f"?{urlencode({'after': after})}" if after else ""
    return f"{queue_path(namespace)}/schedules{query}"


def schedule_path(namespace: str, name: str) -> str:
    return f"{queue_path(namespace)}/schedules/{quote(name, safe='')}"


def jobs_path(namespace: str, kind: JobKind, after: str | None = None) -> str:
    query: dict[str, str] = {"state": kind.value}
    if after:
        query["after"] = after
    return f"{queue_path(namespace)}/jobs?{urlencode(query)}"


@dataclass(frozen=True, slots=True)
class Frame:
    """What every page's frame shows: the bucket, the cost meter, the session token."""

    bucket: str
    interval: float
    requests: Mapping[str, Any]
    csrf: str
    max_pages: int


def layout(
    frame: Frame,
    title: str,
    body: str,
    *,
    crumbs: Sequence[tuple[str, str]] = (),
    refresh: bool = True,
    notice: str = "",
) -> str:
    trail = "".join(f'<li><a href="{_e(href)}">{_e(text)}</a></li>' for href, text in crumbs)
    by_op = ", ".join(f"{op} {n}" for op, n in sorted(frame.requests["by_operation"].items()))
    cost = (
        f'S3 requests by this dashboard in the last minute: <strong id="requests-per-minute">'
        f"{frame.requests['total']}</strong>{f' ({_e(by_op)})' if by_op else ''}. "
        f"Counts read at most {frame.max_pages} page(s) of 1,000 keys per state; "
        '<span class="bound">≥</span> marks a lower bound.'
    )
    refresh_attr = f' data-refresh="{frame.interval:g}"' if refresh else ""
    notice_html = (
        f'<div class="notice" role="status" id="notice">{_e(notice)}</div>' if notice else ""
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>{_e(title)} · pail dashboard</title>
<link rel="stylesheet" href="/static/dashboard.css">
<script src="/static/dashboard.js" defer></script>
</head>
<body{refresh_attr}>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/">pail</a>
  <span class="bucket">s3://{_e(frame.bucket)}</span>
  <nav aria-label="Breadcrumb"><ol class="crumbs"><li><a href="/">Queues</a></li>{trail}</ol></nav>
</header>
<main id="main" tabindex="-1">
<h1>{_e(title)}</h1>
{notice_html}
{body}
</main>
<footer class="cost" id="cost" data-live>
  <p>{cost}</p>
  <p>{"Refreshes every " + f"{frame.interval:g}" + " s while this tab is visible. " if refresh else ""}<span id="refresh-state" aria-live="polite"></span>
  {'<button type="button" id="pause" aria-pressed="false">Pause refresh</button>' if refresh else ""}</p>
</footer>
</body>
</html>"""


def _count(count: Count, href: str | None = None, label: str = "") -> str:
    text = (
        f'<span class="bound" title="a lower bound: more than one page">≥</span>{count.value}'
        if not count.exact
        else str(count.value)
    )
    if href and count.value:
        return f'<a href="{_e(href)}" aria-label="{_e(label)}: {_e(str(count))}">{text}</a>'
    return text


CENSUS_COLUMNS = (*STATES, "foreign", OLDEST_PENDING)
"""The states as ``pail stats`` and ``pail queues`` name them (``pail.stats``), then foreign keys."""


def census_cells(namespace: str, census: Census) -> str:
    cells = [
        _count(census.pending, jobs_path(namespace, JobKind.PENDING), "pending"),
        _count(census.delayed, jobs_path(namespace, JobKind.DELAYED), "delayed"),
        _count(census.waiting, jobs_path(namespace, JobKind.WAITING), "waiting"),
        _count(census.running, jobs_path(namespace, JobKind.RUNNING), "running"),
        _count(census.done, jobs_path(namespace, JobKind.DONE), "done"),
        _count(census.failed, f"{queue_path(namespace)}/dlq", "failed"),
        _count(census.cancelled, jobs_path(namespace, JobKind.CANCELLED), "cancelled"),
        _count(census.foreign),
        _e(duration(census.oldest_pending_age)),
    ]
    return "".join(f'<td class="num">{cell}</td>' for cell in cells)


PAUSED_BADGE = ' <span class="badge paused">paused</span>'


def overview(
    frame: Frame,
    rows: Sequence[tuple[str, Census]],
    foreign: Sequence[str],
    exact: bool,
    paused: Collection[str] = (),
) -> str:
    head = "".join(f'<th scope="col">{_e(c)}</th>' for c in ("queue", *CENSUS_COLUMNS))
    body = "".join(
        f'<tr><th scope="row"><a href="{_e(queue_path(ns))}">{_e(queue_label(ns))}</a>'
        f"{PAUSED_BADGE if ns in paused else ''}</th>{census_cells(ns, census)}</tr>"
        for ns, census in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(CENSUS_COLUMNS) + 1}">No pail queue in this bucket yet.</td></tr>'
    extra = ""
    if foreign:
        names = ", ".join(f"<code>{_e(one_line(name, 60))}</code>" for name in foreign[:20])
        more = f" and {len(foreign) - 20} more" if len(foreign) > 20 else ""
        extra = f'<p class="foreign" id="foreign-top">Not queues (other objects at the top level): {names}{more}.</p>'
    if not exact:
        extra += '<p class="bound-note">More folders than were read: the list of queues is incomplete.</p>'
    table = f"""<section data-live id="queues"><table class="census">
<caption>Jobs by state in every queue</caption>
<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{extra}</section>"""
    return layout(frame, "Queues", table)


def _error_text(error: ErrorInfo | None) -> str:
    return one_line(str(error), 160) if error is not None else ""


def _progress(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        done, total = value.get("done"), value.get("total")
        parts = []
        if isinstance(done, int | float) and isinstance(total, int | float) and total:
            parts.append(f"{done}/{total} ({round(100 * done / total)}%)")
        if isinstance(value.get("message"), str):
            parts.append(value["message"])
        if parts:
            return _e(" · ".join(parts))
    if isinstance(value, int | float) and 0 <= value <= 1:
        return f"{round(value * 100)}%"
    return _e(one_line(value, 60))


def _id_cell(namespace: str, row: JobRow) -> str:
    if row.job_id is None:
        return f'<code class="foreign-key">{_e(one_line(row.key, 80))}</code> <span class="tag">foreign</span>'
    return f'<a href="{_e(job_path(namespace, row.job_id))}"><code>{_e(row.job_id)}</code></a>'


def running_table(namespace: str, rows: Sequence[JobRow], more: bool) -> str:
    head = "".join(
        f'<th scope="col">{c}</th>'
        for c in ("job", "holder", "attempt", "age", "last renewal", "progress")
    )
    body = []
    for row in rows:
        d = row.detail
        if row.foreign or d is None or d.unreadable:
            why = "not a job" if row.foreign else f"unreadable: {d.unreadable if d else 'gone'}"
            body.append(
                f'<tr><td>{_id_cell(namespace, row)}</td><td colspan="5" class="warn">{_e(one_line(why, 120))}</td></tr>'
            )
            continue
        state = (
            ""
            if d.lease_state in (None, "running")
            else f' <span class="tag">{_e(d.lease_state)}</span>'
        )
        body.append(
            f"<tr><td>{_id_cell(namespace, row)}</td><td>{_e(d.holder)}{state}</td>"
            f'<td class="num">{_e(d.attempts)}</td><td class="num">{_e(duration(row.age))}</td>'
            f'<td class="num">{_e(duration(row.in_state))} ago</td><td>{_progress(d.progress)}</td></tr>'
        )
    if not rows:
        body.append('<tr><td colspan="6">No job is running.</td></tr>')
    note = (
        f'<p><a href="{_e(jobs_path(namespace, JobKind.RUNNING))}">More running jobs</a></p>'
        if more
        else ""
    )
    return f"""<section data-live id="running"><h2>Running jobs</h2><table>
<caption class="visually-hidden">Running jobs with their holder, attempt, age, last renewal and progress</caption>
<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}</section>"""


def failures_table(namespace: str, failures: Sequence[Failure]) -> str:
    head = "".join(f'<th scope="col">{c}</th>' for c in ("job", "when", "what", "error"))
    body = []
    for failure in failures:
        row = failure.row
        what = "dead-lettered" if failure.dead else "will retry"
        if row.detail is not None and row.detail.unreadable:
            what = "unreadable object"
        link = _id_cell(namespace, row)
        if failure.dead and row.job_id is not None:
            link = f'<a href="{_e(letter_path(namespace, row.job_id))}"><code>{_e(row.job_id)}</code></a>'
        body.append(
            f'<tr><td>{link}</td><td class="num">{_e(duration(row.in_state))} ago</td>'
            f'<td>{_e(what)}</td><td class="error">{_e(_error_text(failure.error))}</td></tr>'
        )
    if not failures:
        body.append('<tr><td colspan="4">No recent failure.</td></tr>')
    return f"""<section data-live id="failures"><h2>Recent failures</h2><table>
<caption class="visually-hidden">Recent failed attempts and dead letters, newest first</caption>
<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></section>"""


def queue_page(frame: Frame, view: QueueView) -> str:
    ns, snap = view.namespace, view.snapshot
    head = "".join(f'<th scope="col">{_e(c)}</th>' for c in CENSUS_COLUMNS)
    counts = f"""<section data-live id="counts"><table class="census">
<caption>Jobs by state</caption><thead><tr>{head}</tr></thead>
<tbody><tr>{census_cells(ns, snap.census)}</tr></tbody></table></section>"""
    chart = f"""<section data-live id="throughput"><h2>Throughput</h2>
{throughput_svg(snap.finishes, snap.server_time, snap.finishes_note)}
<p class="legend"><span class="key key-done"></span>succeeded <span class="key key-cancelled"></span>cancelled
<span class="key key-dead"></span>dead-lettered · per minute, by the time each job ended; {_e(snap.finishes_note)}.</p></section>"""
    links = "".join(
        f'<li><a href="{_e(jobs_path(ns, kind))}">{_e(STATE_LABELS[kind].capitalize())} jobs</a></li>'
        for kind in JobKind
        if kind is not JobKind.DEAD
    )
    nav = f'<nav aria-label="Job lists"><ul class="tabs">{links}<li><a href="{_e(queue_path(ns))}/dlq">Dead-letter queue</a></li><li><a href="{_e(queue_path(ns))}/search" id="search-link">Search</a></li><li><a href="{_e(schedules_path(ns))}" id="schedules-link">Schedules</a></li></ul></nav>'
    body = (
        nav
        + pause_section(ns, view.pause)
        + limits_section(view.limits)
        + limits_form_section(ns, frame.csrf)
        + counts
        + chart
        + running_table(ns, view.running, view.running_more)
        + failures_table(ns, view.failures)
    )
    return layout(
        frame, f"Queue {queue_label(ns)}", body, crumbs=[(queue_path(ns), queue_label(ns))]
    )


def limits_section(lines: tuple[str, ...]) -> str:
    """The queue's concurrency and rate limits, as ``pail limit show`` prints them.

    >>> limits_section(("queue: at most 3 running at once",))
    '<section data-live id="queue-limits" class="limits"><p>Limits (<code>pail limit</code>): queue: at most 3 running at once</p></section>'
    """
    shown = "; ".join(_e(line) for line in lines) if lines else "none"
    return (
        '<section data-live id="queue-limits" class="limits">'
        f"<p>Limits (<code>pail limit</code>): {shown}</p></section>"
    )


def _limit_form(path: str, csrf: str, kind: Kind, label: str, hint: str, button: str) -> str:
    name = kind.value
    return (
        f'<form method="post" action="{_e(path)}/limits" id="{name}-form" class="limit-form">'
        f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
        f'<input type="hidden" name="kind" value="{name}">'
        f'<label for="{name}-value">{_e(label)}</label> '
        f'<input type="text" id="{name}-value" name="value" size="10" '
        f'maxlength="{limits_form.MAX_VALUE}" placeholder="{_e(hint)}" '
        'aria-describedby="limits-help" autocomplete="off"> '
        f'<label for="{name}-group">for group</label> '
        f'<input type="text" id="{name}-group" name="group" size="14" '
        f'maxlength="{limits_form.MAX_VALUE}" placeholder="none: the queue" '
        'aria-describedby="limits-help" autocomplete="off"> '
        f'<button type="submit" id="set-{name}">{_e(button)}</button></form>'
    )


def limits_form_section(namespace: str, csrf: str) -> str:
    """The forms that change the queue's limits; each asks for a confirmation first.

    Outside the live region: a refresh never replaces what the operator is typing.
    """
    path = queue_path(namespace)
    concurrency = _limit_form(
        path, csrf, Kind.CONCURRENCY, "Jobs running at once", "5, or none", "Set concurrency…"
    )
    rate = _limit_form(path, csrf, Kind.RATE, "Job starts", "10/s, or none", "Set rate…")
    clear = (
        f'<form method="post" action="{_e(path)}/limits" class="limit-form">'
        f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
        f'<input type="hidden" name="kind" value="{Kind.CLEAR.value}">'
        '<button type="submit" class="danger" id="clear-limits">Remove every limit…</button></form>'
    )
    help_text = (
        "An empty value (or none) removes that limit. The group: empty for the queue's own "
        "limit, * for every group without one of its own, or a group's name. A rate is "
        f"COUNT/PERIOD: 10/s, 5/2s, 100/min, 1000/h. Workers follow a change within {REFRESH:g} s."
    )
    return (
        '<section id="limits-form" class="limits-form"><details><summary>Change limits…</summary>'
        f'{concurrency}{rate}{clear}<p id="limits-help" class="legend">{_e(help_text)}</p>'
        "</details></section>"
    )


def limits_question(namespace: str, change: LimitChange) -> str:
    """What the confirmation page asks before ``change`` is made."""
    label = queue_label(namespace)
    if change.kind is Kind.CLEAR:
        return (
            f"Remove every limit of {label}: concurrency and rates, queue-wide and per group? "
            "Workers start jobs without them within "
            f"{REFRESH:g} s."
        )
    if change.group is None:
        who = label
    elif change.group == "*":
        who = f"each group of {label} (every group without a limit of its own)"
    else:
        who = f"group {change.group} of {label}"
    what = "concurrency" if change.kind is Kind.CONCURRENCY else "rate"
    if change.removes:
        question = f"Remove the {what} limit of {who}?"
    elif change.kind is Kind.CONCURRENCY:
        question = f"Let at most {change.concurrency} job(s) of {who} run at once?"
    else:
        question = (
            f"Let at most {change.rate} job(s) of {who} start (windows of the bucket's clock)?"
        )
    return f"{question} {_LIMITS_FOLLOW}"


def limits_confirm_page(frame: Frame, namespace: str, change: LimitChange) -> str:
    """The confirmation of one limit change: its fields again, with ``confirm=yes``."""
    if change.kind is Kind.CLEAR:
        button = "Remove every limit"
    else:
        button = f"{'Remove' if change.removes else 'Set'} the {change.kind.value} limit"
    return confirm_page(
        frame,
        namespace,
        title=f"Limits of {queue_label(namespace)}",
        question=limits_question(namespace, change),
        action=f"{queue_path(namespace)}/limits",
        button=button,
        fields={**change.fields(), "confirm": "yes"},
        back=queue_path(namespace),
        crumbs=[],
    )


def pause_section(namespace: str, state: PauseState | None) -> str:
    """Whether workers claim from the queue, and the link to pause or resume it (confirmed)."""
    path = queue_path(namespace)
    if state is None:
        return (
            '<section data-live id="queue-pause" class="pause-state"><p>Workers claim jobs from this queue. '
            f'<a class="button" id="pause-queue" href="{_e(path)}/pause">Pause…</a></p></section>'
        )
    who = f" by {_e(one_line(state.by, 60))}" if state.by else ""
    why = f": {_e(one_line(state.reason, 120))}" if state.reason else ""
    since = state.paused_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<section data-live id="queue-pause" class="pause-state paused" role="status">'
        f"<p><strong>Paused</strong> since {_e(since)}{who}{why}. Workers claim nothing; "
        "running jobs finish. "
        f'<a class="button" id="resume-queue" href="{_e(path)}/resume">Resume…</a></p></section>'
    )


def _jobs_rows(namespace: str, page: JobPage, *, actions: bool, csrf: str) -> str:
    out = []
    for row in page.rows:
        d = row.detail
        attempts = "-" if d is None or d.attempts is None else str(d.attempts)
        if row.foreign:
            note = f"not a job ({row.size} bytes)"
        elif d is not None and d.unreadable:
            note = f"unreadable: {d.unreadable}"
        elif d is not None and d.holder is not None:
            note = f"held by {d.holder}"
        elif d is not None and d.error is not None:
            note = _error_text(d.error)
        elif row.due_text is not None:
            note = row.due_text
        elif d is not None and d.waits_for is not None:
            note = f"waits for {d.waits_for} of {d.dependencies} dependencies"
        else:
            note = ""
        cells = (
            f"<td>{_id_cell(namespace, row)}</td><td>{_e(row.state)}</td>"
            f'<td class="num">{_e(duration(row.age))}</td><td class="num">{_e(duration(row.in_state))}</td>'
            f'<td class="num">{_e(attempts)}</td><td class="note">{_e(one_line(note, 140))}</td>'
        )
        if actions:
            cells += f'<td class="actions">{letter_actions(namespace, row, csrf)}</td>'
        out.append(f"<tr>{cells}</tr>")
    return "".join(out)


def letter_actions(namespace: str, row: JobRow, csrf: str) -> str:
    if row.job_id is None:
        return '<span class="muted">none (not a job)</span>'
    jid = row.job_id
    slug = quote(jid, safe="")
    return (
        f'<a class="button" href="{_e(letter_path(namespace, jid))}">Inspect<span class="visually-hidden"> {_e(jid)}</span></a> '
        f'<form method="post" action="{_e(letter_path(namespace, jid))}/redrive" class="inline">'
        f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
        f'<button type="submit" id="redrive-{_e(slug)}">Redrive<span class="visually-hidden"> {_e(jid)}</span></button></form> '
        f'<a class="button danger" href="{_e(letter_path(namespace, jid))}/delete">Delete…<span class="visually-hidden"> {_e(jid)}</span></a>'
    )


def jobs_page(frame: Frame, namespace: str, page: JobPage, *, dlq: bool = False) -> str:
    columns = ["job", "state", "age", "in state", "attempts", "holder / error / due"]
    if dlq:
        columns.append("actions")
    head = "".join(f'<th scope="col">{_e(c)}</th>' for c in columns)
    rows = _jobs_rows(namespace, page, actions=dlq, csrf=frame.csrf)
    label = STATE_LABELS[page.kind]
    if not page.rows:
        rows = f'<tr><td colspan="{len(columns)}">No {label} job.</td></tr>'
    more = ""
    if page.more and page.next_after:
        target = (
            f"{queue_path(namespace)}/dlq?{urlencode({'after': page.next_after})}"
            if dlq
            else jobs_path(namespace, page.kind, page.next_after)
        )
        more = f'<p><span class="bound">≥</span> More than shown. <a href="{_e(target)}">Next page</a></p>'
    elif page.more:
        more = '<p><span class="bound">≥</span> More than shown (the listing stopped early).</p>'
    tools = ""
    if dlq and page.rows:
        tools = f'<p><a class="button" href="{_e(queue_path(namespace))}/dlq/redrive-all">Redrive all…</a></p>'
    title = (
        f"Dead-letter queue of {queue_label(namespace)}"
        if dlq
        else f"{label.capitalize()} jobs in {queue_label(namespace)}"
    )
    body = f"""{tools}<section data-live id="jobs"><table>
<caption>{_e(len(page.rows))}{"+" if page.more else ""} {_e(label)} job(s); age is since enqueue, in state since the object was last written</caption>
<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}</section>"""
    return layout(frame, title, body, crumbs=[(queue_path(namespace), queue_label(namespace))])


def _pre(value: Any) -> str:
    return f"<pre>{_e(value)}</pre>"


def _json_block(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return _pre(text)  # _e clips it


def letter_page(frame: Frame, namespace: str, letter: Letter) -> str:
    d = letter.detail
    facts = [
        ("Job", f"<code>{_e(letter.job_id)}</code>"),
        ("Attempts", _e(d.attempts if d.attempts is not None else "-")),
        ("Dead since", _e(letter.last_modified.strftime("%Y-%m-%d %H:%M:%S UTC"))),
        ("Size", f"{letter.size} bytes"),
    ]
    rows = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    parts = [f'<dl class="facts">{rows}</dl>']
    if d.unreadable:
        parts.append(
            f'<section><h2>Unreadable record</h2><p class="warn">{_e(d.unreadable)}</p>{_pre(d.raw or "")}</section>'
        )
    if d.error is not None:
        parts.append(
            f'<section><h2>Error</h2><p class="error"><strong>{_e(d.error.type)}</strong>: {_e(d.error.message)}</p>'
            f"<details><summary>Traceback</summary>{_pre(d.error.traceback)}</details></section>"
        )
    if not d.unreadable:
        parts.append(f"<section><h2>Payload</h2>{_json_block(d.payload)}</section>")
        if d.raw is not None:
            parts.append(f"<section><h2>Raw object (not a job)</h2>{_pre(d.raw)}</section>")
    path = letter_path(namespace, letter.job_id)
    parts.append(
        f"""<section class="actions"><h2>Actions</h2>
<form method="post" action="{_e(path)}/redrive" class="inline"><input type="hidden" name="csrf" value="{_e(frame.csrf)}">
<button type="submit" id="redrive">Redrive</button></form>
<a class="button danger" id="delete" href="{_e(path)}/delete">Delete…</a>
<a class="button" href="{_e(job_path(namespace, letter.job_id))}">Job page</a></section>"""
    )
    return layout(
        frame,
        f"Dead letter {letter.job_id}",
        "".join(parts),
        crumbs=[
            (queue_path(namespace), queue_label(namespace)),
            (f"{queue_path(namespace)}/dlq", "Dead-letter queue"),
        ],
        refresh=False,
    )


def confirm_page(
    frame: Frame,
    namespace: str,
    *,
    title: str,
    question: str,
    action: str,
    button: str,
    fields: Mapping[str, str],
    back: str,
    reason: str | None = None,
    crumbs: Sequence[tuple[str, str]] | None = None,
) -> str:
    """A confirmation form; ``reason`` labels an optional text box sent as ``reason``.

    ``crumbs`` are the breadcrumbs after the queue's (default: its dead-letter queue).
    """
    hidden = "".join(
        f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">' for k, v in fields.items()
    )
    if reason is not None:
        hidden += (
            f'<p><label for="reason">{_e(reason)}</label> '
            '<input type="text" id="reason" name="reason" maxlength="500" size="50"></p>'
        )
    body = f"""<section class="confirm"><p>{_e(question)}</p>
<form method="post" action="{_e(action)}"><input type="hidden" name="csrf" value="{_e(frame.csrf)}">{hidden}
<button type="submit" class="danger" id="confirm">{_e(button)}</button>
<a class="button" href="{_e(back)}" id="cancel">Cancel</a></form></section>"""
    after = [(f"{queue_path(namespace)}/dlq", "Dead-letter queue")] if crumbs is None else crumbs
    return layout(
        frame,
        title,
        body,
        crumbs=[(queue_path(namespace), queue_label(namespace)), *after],
        refresh=False,
    )


def _when(moment: Any) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _schedule_row(namespace: str, row: ScheduleRow) -> str:
    entry = row.entry
    info = entry.info
    if info is None:
        return (
            f'<tr class="unreadable"><td><code class="foreign-key">{_e(one_line(entry.key, 100))}</code> '
            f'<span class="tag">not a schedule</span></td>'
            f'<td colspan="5" class="warn">{_e(one_line(entry.problem or "", 200))}</td>'
            '<td class="actions"><span class="muted">none</span></td></tr>'
        )
    s = info.schedule
    path = schedule_path(namespace, s.name)
    if s.last_job is None:
        last = '<span class="muted">none yet</span>'
    else:
        state = row.last_state or "-"
        badge = state if state in _HEADLINES else "unknown"
        last = (
            f'<a href="{_e(job_path(namespace, s.last_job))}"><code>{_e(s.last_job)}</code></a> '
            f'<span class="badge state-{_e(badge)}">{_e(one_line(state, 100))}</span>'
        )
    if s.paused:
        status = '<span class="badge paused">paused</span>'
        next_run = '<span class="muted">none while paused</span>'
        action = f'<a class="button" href="{_e(path)}/resume" id="resume-{_e(quote(s.name, safe=""))}">Resume…<span class="visually-hidden"> {_e(s.name)}</span></a>'
    else:
        status = "active"
        next_run = _e(_when(info.next_due))
        action = f'<a class="button" href="{_e(path)}/pause" id="pause-{_e(quote(s.name, safe=""))}">Pause…<span class="visually-hidden"> {_e(s.name)}</span></a>'
    return (
        f'<tr><th scope="row"><code>{_e(s.name)}</code> <span class="tag">{_e(s.source)}</span></th>'
        f"<td>{_e(s.timing.text)}{f' · catch up {s.catch_up}' if s.catch_up > 1 else ''}</td>"
        f'<td class="num">{next_run}</td><td class="num">{_e(_when(s.last_tick))}</td>'
        f'<td>{last}</td><td>{status}</td><td class="actions">{action}</td></tr>'
    )


def schedules_page(frame: Frame, view: SchedulesView) -> str:
    """The queue's schedules: timing, next run, last tick, last job and its state, Pause/Resume."""
    ns, page = view.namespace, view.page
    columns = ("schedule", "when", "next run", "last tick", "last job", "state", "actions")
    head = "".join(f'<th scope="col">{_e(c)}</th>' for c in columns)
    rows = "".join(_schedule_row(ns, row) for row in view.rows)
    if not view.rows:
        rows = (
            f'<tr><td colspan="{len(columns)}">No schedule in this queue '
            "(<code>pail schedule add</code>, or <code>Pail.schedule</code>).</td></tr>"
        )
    more = ""
    if page.more and page.next_after:
        more = f'<p><span class="bound">≥</span> More than shown. <a href="{_e(schedules_path(ns, page.next_after))}">Next page</a></p>'
    elif page.more:
        more = '<p><span class="bound">≥</span> More than shown (the listing stopped early).</p>'
    body = f"""<section data-live id="schedules"><table>
<caption>{_e(len(view.rows))}{"+" if page.more else ""} schedule(s), by name; times by the bucket's clock. The reaper's pass runs the ticks (the deployed reaper, or <code>pail reap --every</code>).</caption>
<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}</section>"""
    return layout(
        frame,
        f"Schedules of {queue_label(ns)}",
        body,
        crumbs=[(queue_path(ns), queue_label(ns))],
    )


_HEADLINES = {
    "pending": "Waiting in the queue for a worker.",
    "waiting": "Waiting for its dependencies: it becomes pending once they all succeeded.",
    "running": "A worker is on it.",
    "done": "Finished successfully.",
    "failed": "Failed; moved to the dead-letter queue.",
    "cancelled": "Cancelled; it will not run.",
}


def job_page(
    frame: Frame,
    namespace: str,
    job_id: str,
    status: JobStatus | None,
    lease: JobRow | None,
    status_link: str,
) -> str:
    crumbs = [(queue_path(namespace), queue_label(namespace))]
    if status is None:
        body = '<p class="warn" id="job-state">No object of this job exists: the id is wrong, or its objects expired.</p>'
        return layout(frame, f"Job {job_id}", body, crumbs=crumbs)
    state = status.state.value
    headline = _HEADLINES.get(state, "")
    if state == "pending" and status.error is not None:
        headline = f"Waiting to retry: attempt {status.attempts} failed."
    facts: list[tuple[str, str]] = [("Attempts", str(status.attempts))]
    if status.enqueued_at:
        facts.append(("Enqueued", status.enqueued_at.strftime("%Y-%m-%d %H:%M:%S UTC")))
    if status.tags:
        facts.append(("Tags", " ".join(f"{k}={v}" for k, v in status.tags.items())))
    if status.updated_at:
        facts.append(("Last change", status.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC")))
    if lease is not None and lease.detail is not None and not lease.detail.unreadable:
        facts.append(("Holder", str(lease.detail.holder)))
        facts.append(("Last renewal", f"{duration(lease.in_state)} ago"))
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    parts = [
        f'<div class="status"><span class="badge state-{_e(state)}" id="job-state">{_e(state)}</span> <span id="headline">{_e(headline)}</span></div>',
        f'<dl class="facts">{rows}</dl>',
    ]
    if status.progress is not None:
        parts.append(
            f'<section><h2>Progress</h2><p id="progress">{_progress(status.progress)}</p></section>'
        )
    if status.error is not None:
        parts.append(
            f'<section><h2>Last error</h2><p class="error"><strong>{_e(status.error.type)}</strong>: {_e(status.error.message)}</p>'
            f"<details><summary>Traceback</summary>{_pre(status.error.traceback)}</details></section>"
        )
    if state == "failed":
        parts.append(
            f'<p><a class="button" href="{_e(letter_path(namespace, job_id))}">Inspect the dead letter</a></p>'
        )
    parts.append(
        f'<p><a href="{_e(status_link)}">Open the live status page</a> (the browser polls the bucket itself; it needs a CORS rule for this origin on AWS).</p>'
    )
    body = f'<section data-live id="job">{"".join(parts)}</section>'
    return layout(frame, f"Job {job_id}", body, crumbs=crumbs)


def error_page(frame: Frame | None, status: int, message: str) -> str:
    body = f'<p class="warn">{_e(message)}</p><p><a href="/">Back to the queues</a></p>'
    if frame is None:
        return f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{status}</title><link rel="stylesheet" href="/static/dashboard.css"></head><body><main id="main"><h1>{status}</h1>{body}</main></body></html>'
    return layout(frame, f"{status}", body, refresh=False)


def notice_text(code: str | None, job_id: str | None, count: str | None) -> str:
    template = NOTICES.get(code or "")
    if template is None:
        return ""
    return template.format(id=job_id or "?", n=count or "0")
