"""The dashboard's search page: ``/q/{queue}/search``, a GET form and a page of matches.

The form takes an id or id prefix, tags (``key=value``, one per field), a
state and two times (enqueued between; the browser's ``datetime-local``
fields, read as UTC). It is a GET: a search changes nothing, and its URL can
be bookmarked or shared. Every value shown, tag values first, is foreign
bytes and goes through ``html.escape``; the page says what the search cost.
It does not refresh itself (each refresh would be another search).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from pail.dashboard.views import Frame, _e, job_path, layout, queue_path
from pail.errors import ConfigurationError
from pail.operate.queues import queue_label
from pail.operate.search import SearchPage
from pail.operate.text import one_line
from pail.status import JobState
from pail.tags import parse

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
TAG_FIELDS = 2
"""Tag fields the form shows (more can be given in the URL: ``tag=a=1&tag=b=2&tag=c=3``)."""


@dataclass(frozen=True, slots=True)
class SearchForm:
    """What the form asked, as typed (shown back in the fields)."""

    text: str = ""
    tags: tuple[str, ...] = ()
    state: str = ""
    since: str = ""
    until: str = ""
    after: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_query(cls, query: Mapping[str, Sequence[str]]) -> SearchForm:
        """The form's fields from a parsed query string (missing ones empty)."""

        def one(name: str) -> str:
            values = query.get(name)
            return values[0].strip() if values else ""

        tags = tuple(t.strip() for t in query.get("tag", ()) if t.strip())
        limit = one("limit")
        size = int(limit) if limit.isdigit() and 1 <= int(limit) <= MAX_LIMIT else DEFAULT_LIMIT
        return cls(
            one("q"), tags, one("state"), one("since"), one("until"), one("after") or None, size
        )

    @property
    def asked(self) -> bool:
        """True when any field was filled (an empty form shows no results, and costs nothing)."""
        return bool(self.text or self.tags or self.state or self.since or self.until)

    def arguments(self) -> dict[str, object]:
        """``Pail.search``'s keyword arguments, or ``ConfigurationError`` naming the bad field."""
        tags: dict[str, str] = {}
        for pair in self.tags:
            key, value = parse(pair)
            tags[key] = value
        return {
            "tags": tags,
            "id_prefix": self.text or None,
            "state": self.state or None,
            "since": _moment("since", self.since),
            "until": _moment("until", self.until),
            "after": self.after,
            "limit": self.limit,
        }

    def query_string(self, after: str | None) -> str:
        """This search's URL query, on the page after ``after``."""
        pairs: list[tuple[str, str]] = [("q", self.text)] if self.text else []
        pairs += [("tag", tag) for tag in self.tags]
        pairs += [(name, value) for name, value in self._fields() if value]
        if self.limit != DEFAULT_LIMIT:
            pairs.append(("limit", str(self.limit)))
        if after:
            pairs.append(("after", after))
        return urlencode(pairs)

    def _fields(self) -> list[tuple[str, str]]:
        return [("state", self.state), ("since", self.since), ("until", self.until)]


def _moment(name: str, text: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a date and time, got {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _form_html(namespace: str, form: SearchForm) -> str:
    states = "".join(
        f'<option value="{_e(value)}"{" selected" if form.state == value else ""}>{_e(label)}</option>'
        for value, label in [("", "any state"), *((s.value, s.value) for s in JobState)]
    )
    tags = list(form.tags) + [""] * max(0, TAG_FIELDS - len(form.tags))
    tag_fields = "".join(
        f'<label>Tag <input name="tag" id="search-tag-{n}" value="{_e(tag)}" placeholder="customer=acme" autocomplete="off"></label>'
        for n, tag in enumerate(tags)
    )
    return f"""<form method="get" action="{_e(queue_path(namespace))}/search" class="search" role="search" id="search-form">
<label>Job id or id prefix <input name="q" id="search-q" value="{_e(form.text)}" autocomplete="off" spellcheck="false"></label>
{tag_fields}
<label>State <select name="state" id="search-state">{states}</select></label>
<label>Enqueued from (UTC) <input type="datetime-local" step="1" name="since" id="search-since" value="{_e(form.since)}"></label>
<label>to (UTC) <input type="datetime-local" step="1" name="until" id="search-until" value="{_e(form.until)}"></label>
<button type="submit" id="search-submit">Search</button>
</form>"""


def _results_html(namespace: str, form: SearchForm, page: SearchPage) -> str:
    head = "".join(
        f'<th scope="col">{c}</th>'
        for c in ("job", "state", "enqueued", "attempts", "tags", "last error")
    )
    rows = "".join(
        "<tr>"
        f'<td><a href="{_e(job_path(namespace, job.id))}"><code>{_e(job.id)}</code></a></td>'
        f'<td><span class="badge state-{_e(job.state.value)}">{_e(job.state.value)}</span></td>'
        f"<td>{_e(job.enqueued_at.strftime('%Y-%m-%d %H:%M:%S UTC') if job.enqueued_at else '-')}</td>"
        f"<td>{_e(job.attempts)}</td>"
        f'<td class="tags">{"".join(f"<span class=tag>{_e(k)}={_e(v)}</span> " for k, v in job.tags.items())}</td>'
        f"<td>{_e(one_line(str(job.error), 80) if job.error else '')}</td>"
        "</tr>"
        for job in page.jobs
    )
    if not page.jobs:
        rows = '<tr><td colspan="6">No job matches.</td></tr>'
    spent = ", ".join(f"{n} {op}" for op, n in sorted(page.requests.items())) or "no request"
    source = "the tag index" if page.plan == "index" else "key ranges of the state prefixes"
    more = ""
    if page.more and page.next_after:
        target = f"{queue_path(namespace)}/search?{form.query_string(page.next_after)}"
        more = f'<p><a href="{_e(target)}" id="search-next">Next page</a></p>'
    return f"""<section id="search-results"><table>
<caption>{_e(len(page.jobs))}{"+" if page.more else ""} job(s), oldest first</caption>
<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}
<p class="cost" id="search-cost">This search read {_e(page.candidates)} candidate(s) from {_e(source)}: {_e(spent)}.</p></section>"""


def search_page(
    frame: Frame,
    namespace: str,
    form: SearchForm,
    page: SearchPage | None,
    problem: str | None = None,
) -> str:
    """The search form, filled as asked, and the page of matches (or what was wrong with the form)."""
    body = _form_html(namespace, form)
    if problem is not None:
        body += f'<p class="warn" role="alert" id="search-problem">{_e(problem)}</p>'
    elif page is not None:
        body += _results_html(namespace, form, page)
    return layout(
        frame,
        f"Search {queue_label(namespace)}",
        body,
        crumbs=[(queue_path(namespace), queue_label(namespace))],
        refresh=False,
    )
