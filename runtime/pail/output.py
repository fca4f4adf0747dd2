"""How the ``pail`` command talks: Rich for people, JSON for scripts, one line per error.

Every command renders through an ``Output``. In human mode it prints Rich
tables and coloured states on a terminal, and plain lines off one (a
table becomes a tab-separated header and rows, for ``cut`` and ``awk``); with
``--json`` it prints exactly one JSON document per result on stdout, so
``pail status jobs ID --json | jq .state`` works. Errors always go to stderr
as a single ``error: ...`` line, whatever the mode.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pail.operate.text import duration

PIPE_WIDTH = 200

STATE_STYLES = {
    "pending": "yellow",
    "waiting": "blue",
    "running": "cyan",
    "done": "green",
    "failed": "red",
    "cancelled": "magenta",
}


def to_json_text(data: Any) -> str:
    """One line of JSON; datetimes become ISO 8601 strings.

    >>> to_json_text({"n": 1})
    '{"n": 1}'
    """
    return json.dumps(data, default=_default, ensure_ascii=False)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def state_text(state: str) -> str:
    """Rich markup for a job state, coloured by state."""
    style = STATE_STYLES.get(state, "white")
    return f"[bold {style}]{escape(state)}[/]"


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """A short, human duration since ``moment``: ``"4s"``, ``"3m 12s"``, ``"2h 5m"``, ``"3d 4h"``.

    >>> from datetime import timedelta
    >>> now = datetime(2025, 1, 1, tzinfo=UTC)
    >>> age(now - timedelta(seconds=192), now)
    '3m 12s'
    """
    if moment is None:
        return "-"
    return duration(((now or datetime.now(UTC)) - moment).total_seconds())


def when(moment: datetime | None) -> str:
    """``moment`` as a second-resolution UTC timestamp with its age, or ``-``."""
    if moment is None:
        return "-"
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({age(moment)} ago)"


@dataclass(frozen=True, slots=True)
class Column:
    """A column of ``Output.table``: its header, and how a terminal shows it."""

    name: str
    justify: JustifyMethod = "left"
    style: str | None = None
    wrap: bool = False

    @property
    def plain_name(self) -> str:
        """The header off a terminal: one token, so a header splits like its rows.

        >>> Column("holder / error / due").plain_name
        'holder/error/due'
        """
        return "_".join(self.name.replace(" / ", "/").split())


def _plain_cell(cell: str) -> str:
    """A cell off a terminal: markup removed, on one line, no tab inside."""
    return " ".join(Text.from_markup(cell).plain.split())


class Output:
    """Renders results and errors for one invocation of the ``pail`` command.

    >>> out = Output(json_mode=True)
    >>> out.result({"id": "01J..."}, lambda: None)
    {"id": "01J..."}
    """

    def __init__(self, *, json_mode: bool = False, debug: bool = False) -> None:
        self.json_mode = json_mode
        self.debug = debug
        # No file given: Rich resolves sys.stdout / sys.stderr at print time,
        # so a redirected stream (a pipe, a test runner) is honoured.
        self.console = Console(highlight=False)
        self.errors = Console(stderr=True, highlight=False, soft_wrap=True)
        if not self.console.is_terminal:
            # In a pipe or a log, a long line stays one line, and a table
            # row stays one row, rather than wrapping at 80 columns.
            self.console.soft_wrap = True
            if "COLUMNS" not in os.environ:
                self.console.width = PIPE_WIDTH

    @property
    def interactive(self) -> bool:
        """True when stdout is a terminal (live displays, colours)."""
        return self.console.is_terminal

    def result(self, data: Any, human: Any) -> None:
        """Print ``data`` as JSON in ``--json`` mode, else call ``human()`` to render it."""
        if self.json_mode:
            self.line(to_json_text(data))
        else:
            human()

    def line(self, text: str) -> None:
        """A plain line on stdout, never wrapped or styled: ids, URLs, JSON."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def print(self, *renderables: Any, **options: Any) -> None:
        self.console.print(*renderables, **options)

    def note(self, text: str) -> None:
        """A human remark on stderr (hints, progress) that never pollutes piped stdout."""
        self.errors.print(text, style="dim")

    def open_link(self, url: str) -> bool:
        """Open ``url`` in a browser; where none can be opened, say so and give the link.

        ``webbrowser`` finds no browser on a machine without a display (a
        server, a container, SSH) and then returns False without a word.
        """
        import webbrowser

        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            self.errors.print(
                "could not open a browser here (no display, or no browser found); "
                f"open this link yourself: {url}",
                markup=False,
                highlight=False,
            )
        return opened

    def error(self, message: str) -> None:
        """The one-line error report: ``error: <cause>`` on stderr."""
        first, *rest = str(message).strip().splitlines() or [""]
        text = first if not rest else f"{first} ..."
        self.errors.print(f"[bold red]error:[/] {escape(text)}")

    def key_values(self, rows: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        """A two-column table of labelled values (markup allowed in values).

        Off a terminal it prints ``label  value`` lines, unwrapped and
        unpadded, which grep and CI logs handle better than a table.
        """
        rows = list(rows)
        if not self.console.is_terminal:
            width = max((len(key) for key, _ in rows), default=0)
            if title:
                self.line(title)
            for key, value in rows:
                text = Text.from_markup(value).plain if isinstance(value, str) else str(value)
                self.line(f"{key:<{width}}  {text}".rstrip())
            return
        table = Table(
            show_header=False, box=None, title=title, title_justify="left", pad_edge=False
        )
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        for key, value in rows:
            table.add_row(key, value if isinstance(value, str) else escape(str(value)))
        self.console.print(table)

    def table(
        self,
        columns: Sequence[Column],
        rows: Iterable[Sequence[str]],
        title: str | None = None,
    ) -> None:
        """A table of rows (cells may hold markup): Rich on a terminal, plain lines off one.

        Off a terminal (a pipe, a log) it prints a header line and one line
        per row, cells separated by a tab, with no box, colour or wrapping,
        so ``cut -f2`` and ``awk -F'\\t'`` read it; the title goes to stderr
        as a note. ``--json`` remains the format to parse when it matters.

        >>> import io, contextlib
        >>> buffer = io.StringIO()
        >>> with contextlib.redirect_stdout(buffer):
        ...     Output().table([Column("pending"), Column("oldest pending")], [["2", "3m 12s"]])
        >>> buffer.getvalue().splitlines()
        ['pending\\toldest_pending', '2\\t3m 12s']
        """
        rows = [list(row) for row in rows]
        if not self.console.is_terminal:
            if title:
                self.note(escape(Text.from_markup(title).plain))
            self.line("\t".join(column.plain_name for column in columns))
            for row in rows:
                self.line("\t".join(_plain_cell(cell) for cell in row))
            return
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(
                column.name,
                justify=column.justify,
                style=column.style,
                no_wrap=not column.wrap,
                overflow="fold",
            )
        for row in rows:
            table.add_row(*row)
        self.console.print(table)

    def pretty_json(self, data: Any) -> None:
        """Indented JSON for people (a result, a payload)."""
        self.line(json.dumps(data, indent=2, default=_default, ensure_ascii=False))


def compact(value: Any, limit: int = 80) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters.

    >>> compact({"report_id": "q2"})
    '{"report_id": "q2"}'
    """
    text = value if isinstance(value, str) else to_json_text(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
