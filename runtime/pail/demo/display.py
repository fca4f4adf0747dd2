"""The demo's live progress: a Rich panel on a terminal, plain timestamped lines otherwise.

Both displays take the same two calls: ``event(text)`` for something that
happened (a worker killed, a lease reclaimed, a job dead-lettered) and
``update(snapshot)`` for the queue's counts. On a terminal the events scroll
above a panel that redraws in place; in a pipe or a CI log each event is a
line, and the counts are a line at most once per ``every`` seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The queue at one moment of the demo."""

    elapsed: float
    total: int
    pending: int
    running: int
    done: int
    failed: int
    workers: int
    throughput: float
    """Jobs finished per second since the workers started."""

    @property
    def finished(self) -> int:
        return self.done + self.failed

    def line(self) -> str:
        """The counts as one plain line.

        >>> Snapshot(2.0, 10, 5, 2, 3, 0, 4, 1.5).line()
        'pending 5  running 2  done 3  failed 0  |  3/10 finished  1.5 jobs/s  4 workers'
        """
        return (
            f"pending {self.pending}  running {self.running}  done {self.done}  "
            f"failed {self.failed}  |  {self.finished}/{self.total} finished  "
            f"{self.throughput:.1f} jobs/s  {self.workers} workers"
        )


class Display(Protocol):
    def event(self, elapsed: float, text: str, style: str = "") -> None: ...

    def update(self, snapshot: Snapshot) -> None: ...

    def close(self) -> None: ...


def stamp(elapsed: float) -> str:
    """``[  3.2s]``: the time since the demo's workers started."""
    return f"[{elapsed:5.1f}s]"


class PlainDisplay:
    """Timestamped lines for a pipe, a file or a CI log."""

    def __init__(self, console: Console, every: float = 1.0) -> None:
        self._console = console
        self._every = every
        self._last = float("-inf")

    def event(self, elapsed: float, text: str, style: str = "") -> None:
        self._console.print(f"{stamp(elapsed)} {text}", markup=False, soft_wrap=True)

    def update(self, snapshot: Snapshot) -> None:
        now = time.monotonic()
        if now - self._last >= self._every or snapshot.finished == snapshot.total:
            self._last = now
            self._console.print(
                f"{stamp(snapshot.elapsed)} {snapshot.line()}", markup=False, soft_wrap=True
            )

    def close(self) -> None:
        pass


class LiveDisplay:
    """A panel redrawn in place, with events scrolling above it."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._live = Live(console=console, refresh_per_second=8, transient=True)
        self._live.start()
        self._closed = False

    def event(self, elapsed: float, text: str, style: str = "") -> None:
        line = Text(f"{stamp(elapsed)} ", style="dim")
        line.append(text, style=style)
        self._live.console.print(line)

    def update(self, snapshot: Snapshot) -> None:
        self._live.update(render_panel(snapshot))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._live.stop()


def render_panel(snapshot: Snapshot) -> Table:
    """The live panel: a progress bar, then the counts per state."""
    bar = ProgressBar(total=max(1, snapshot.total), completed=snapshot.finished, width=40)
    top = Table.grid(padding=(0, 2))
    top.add_row(
        bar,
        Text.from_markup(
            f"[bold]{snapshot.finished}/{snapshot.total}[/] finished  "
            f"{snapshot.throughput:.1f} jobs/s  [dim]{escape(stamp(snapshot.elapsed))}[/]"
        ),
    )
    counts = Table.grid(padding=(0, 2))
    counts.add_row(
        f"[yellow]pending[/] {snapshot.pending}",
        f"[cyan]running[/] {snapshot.running}",
        f"[green]done[/] {snapshot.done}",
        f"[red]failed[/] {snapshot.failed}",
        f"[dim]{snapshot.workers} workers[/]",
    )
    panel = Table.grid()
    panel.add_row(top)
    panel.add_row(counts)
    return panel


def make_display(console: Console) -> Display:
    """A live panel on a terminal, plain lines anywhere else."""
    if console.is_terminal and not console.is_dumb_terminal:
        return LiveDisplay(console)
    return PlainDisplay(console)
