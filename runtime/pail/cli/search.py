"""``pail jobs --tag k=v --since 2h --state failed``: the search flags of ``pail jobs``.

``pail jobs`` lists one state by default (``pail.cli.admin``); any of these
flags makes it a search (``Pail.search``), whose cost is printed with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from rich.markup import escape

from pail.errors import ConfigurationError
from pail.operate.search import SearchPage
from pail.operate.text import one_line
from pail.output import Column, Output, state_text, when
from pail.queue import Pail
from pail.tags import parse

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
SEARCH_STATES = {"pending": "pending", "running": "running", "done": "done"}
"""``--state`` values a search takes as they are; ``dead``/``failed`` and ``cancelled`` below."""


class Moment(click.ParamType[datetime | timedelta, Any]):
    """A time: an age back from now (``90s``, ``15m``, ``2h``, ``3d``, ``1w``) or an ISO 8601 time.

    A time without a zone is UTC.

    >>> Moment().convert("2026-03-01T09:00", None, None)
    datetime.datetime(2026, 3, 1, 9, 0, tzinfo=datetime.timezone.utc)
    """

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime | timedelta):
            return value
        text = str(value).strip()
        ago = _AGO.match(text)
        if ago:
            seconds = float(ago.group(1)) * _UNIT[ago.group(2)]
            if seconds > 366 * 86_400 * 100:
                self.fail(f"{text!r} is too far back", param, ctx)
            return timedelta(seconds=seconds)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{text!r} is neither an age (90s, 15m, 2h, 3d, 1w) nor an ISO 8601 time",
                param,
                ctx,
            )
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def wanted(tags: Sequence[str], since: Any, until: Any, id_prefix: str | None) -> bool:
    """True when any search flag was given: ``pail jobs`` then searches instead of listing."""
    return bool(tags) or since is not None or until is not None or bool(id_prefix)


def _tags(pairs: Sequence[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for pair in pairs:
        try:
            key, value = parse(pair)
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc), param_hint="--tag") from None
        if key in tags and tags[key] != value:
            raise click.BadParameter(f"tag {key} given twice", param_hint="--tag")
        tags[key] = value
    return tags


def _until(moment: datetime | timedelta | None, now: datetime) -> datetime | None:
    return now - moment if isinstance(moment, timedelta) else moment


def run(
    pail: Pail,
    out: Output,
    *,
    tags: Sequence[str],
    state: str | None,
    since: datetime | timedelta | None,
    until: datetime | timedelta | None,
    id_prefix: str | None,
    limit: int,
    after: str | None,
) -> None:
    """Search and print a page of jobs, and what the page cost."""
    chosen = {"dead": "failed", "failed": "failed", "cancelled": "cancelled", None: None}
    if state == "delayed":
        raise click.BadParameter(
            "a search finds delayed jobs as pending (by --tag or --id-prefix)",
            param_hint="--state",
        )
    search_state = SEARCH_STATES.get(state or "", chosen.get(state))
    page = pail.search(
        tags=_tags(tags),
        state=search_state,
        since=since,
        until=_until(until, pail.clock.now()),
        id_prefix=id_prefix,
        limit=limit,
        after=after,
    )
    where = f"s3://{pail.bucket}/{pail.keys.root}"
    out.result(page.to_json(), lambda: render(out, page, where))


def _cost(page: SearchPage) -> str:
    spent = ", ".join(f"{n} {op}" for op, n in sorted(page.requests.items())) or "no request"
    return f"{page.plan}: {spent} ({page.candidates} candidate(s) read)"


def render(out: Output, page: SearchPage, where: str) -> None:
    """A page of search results as a table, its cost and the next page's flag."""
    if not page.jobs:
        out.line(f"no job matches in {where}")
    else:
        title = f"{len(page.jobs)}{'+' if page.more else ''} job(s) in {where}"
        columns = [Column(name) for name in ("id", "state", "enqueued", "attempts")]
        columns += [Column("tags", wrap=True), Column("error", wrap=True)]
        rows = [
            [
                escape(job.id),
                state_text(job.state.value),
                when(job.enqueued_at),
                str(job.attempts),
                escape(" ".join(f"{k}={v}" for k, v in job.tags.items())),
                escape(one_line(str(job.error), 60) if job.error else ""),
            ]
            for job in page.jobs
        ]
        out.table(columns, rows, title=escape(title))
    out.note(f"cost: {_cost(page)}")
    if page.more:
        out.note(f"more may match; next page: --after {page.next_after}")
