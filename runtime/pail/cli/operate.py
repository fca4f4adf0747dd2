"""The queue as a whole: ``stats`` (optionally live) and ``reap``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.params import Seconds
from pail.cli.pause import pause_json, pause_text
from pail.operate.text import duration
from pail.output import Column, Output, to_json_text
from pail.protocol.reaper import ReapReport
from pail.queue import Pail
from pail.stats import OLDEST_PENDING, STATES, Stats


def stats_title(pail: Pail) -> str:
    """Where the counts come from: ``s3://bucket/namespace/  (mode)``."""
    return f"s3://{pail.bucket}/{pail.keys.root}  ({pail.mode.value})"


STATE_STYLES = {
    "pending": "yellow",
    "delayed": "yellow",
    "waiting": "blue",
    "running": "cyan",
    "done": "green",
    "failed": "red",
    "cancelled": "magenta",
}


def stats_cells(
    stats: Stats, rate: float | None = None, *, with_rate: bool = False
) -> tuple[list[Column], list[str]]:
    """The queue's counts as columns and one row of cells; ``with_rate`` adds done/s.

    The columns are ``pail.stats.STATES``, as ``pail queues`` and the dashboard show them.
    """
    columns = [Column(state, justify="right", style=STATE_STYLES[state]) for state in STATES]
    columns.append(Column(OLDEST_PENDING, justify="right"))
    cells = [str(stats.of(state)) for state in STATES]
    cells.append(_age(stats))
    if with_rate:
        columns.append(Column("done/s", justify="right"))
        cells.append("-" if rate is None else f"{rate:.1f}")
    return columns, cells


def _age(stats: Stats) -> str:
    age = stats.oldest_pending
    return "-" if age is None else duration(age.total_seconds())


def stats_table(
    pail: Pail, stats: Stats, rate: float | None = None, *, with_rate: bool = False
) -> Table:
    """The queue's counts as a one-row Rich table, for the live display of ``--watch``."""
    columns, cells = stats_cells(stats, rate, with_rate=with_rate)
    table = Table(title=stats_title(pail), title_justify="left")
    for column in columns:
        table.add_column(column.name, justify=column.justify, style=column.style)
    table.add_row(*cells)
    return table


def stats_line(stats: Stats, rate: float | None = None) -> str:
    """The queue's counts as one plain line, for logs and pipes."""
    counts = " ".join(f"{state}={stats.of(state)}" for state in STATES)
    line = f"{counts} oldest_pending={_age(stats)}"
    return line if rate is None else f"{line} done_per_s={rate:.1f}"


class _Rate:
    """Jobs finished per second between two readings."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None

    def update(self, stats: Stats) -> float | None:
        now, finished = time.monotonic(), stats.done + stats.failed
        last, self._last = self._last, (now, finished)
        if last is None or now <= last[0]:
            return None
        return max(0, finished - last[1]) / (now - last[0])


def watch(
    out: Output,
    read: Callable[[], Stats],
    render: Callable[[Stats, float | None], Any],
    *,
    interval: float,
    count: int | None,
) -> None:
    """Refresh every ``interval`` seconds, ``count`` times (or until Ctrl-C)."""
    rate = _Rate()
    live: Live | None = None
    if out.interactive and not out.json_mode:
        live = Live(console=out.console, auto_refresh=False, transient=False)
        live.start()
    shown = 0
    try:
        while count is None or shown < count:
            if shown:
                time.sleep(interval)
            stats = read()
            per_second = rate.update(stats)
            shown += 1
            if out.json_mode:
                out.line(to_json_text({**stats.to_json(), "done_per_s": per_second}))
            elif live is not None:
                hint = Text(f"every {interval:g} s, Ctrl-C to stop", style="dim")
                live.update(Group(render(stats, per_second), hint), refresh=True)
            else:
                out.line(f"{time.strftime('%H:%M:%S')} {stats_line(stats, per_second)}")
    finally:
        # Ctrl-C (the usual way to leave a watch) goes on to the group: exit 130.
        if live is not None:
            live.stop()


@click.command()
@bucket_argument
@click.option("--watch", "watching", is_flag=True, help="Refresh until Ctrl-C.")
@click.option(
    "--interval",
    type=Seconds(minimum=0.1),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --watch: time between refreshes.",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --watch: stop after N refreshes.",
)
@global_options
@click.pass_context
def stats(
    ctx: click.Context, bucket: str | None, watching: bool, interval: float, count: int | None
) -> None:
    """Count the jobs in each state, and the age of the oldest pending job.

    "pending" counts the jobs a worker could claim now, "delayed" those
    whose due time is still to come; "done" counts successes (cancelled
    jobs have their own column), "failed" dead letters. pail queues and the
    dashboard count the same states under the same names.

    With --watch it refreshes in place on a terminal, prints one line per
    refresh when piped, and one JSON object per refresh with --json. Each
    refresh lists every prefix of the queue. Ctrl-C ends a watch with exit
    code 130 (--count N ends it with 0). Without --watch it also says
    whether the queue is paused (`pail pause`; 1 GET more).
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    if watching:
        watch(
            out,
            pail.stats,
            lambda s, r: stats_table(pail, s, r, with_rate=True),
            interval=interval,
            count=count,
        )
        return
    current = pail.stats()
    paused = pail.paused()
    columns, cells = stats_cells(current)

    def human() -> None:
        out.table(columns, [cells], title=stats_title(pail))
        if paused is not None:
            out.line(f"{pause_text(paused)} (pail resume to claim again)")

    out.result({**current.to_json(), "pause": pause_json(paused)}, human)


def render_reap(out: Output, report: ReapReport) -> None:
    verdict = "complete pass" if report.complete_pass else "partial pass (more next time)"
    out.key_values(
        [
            ("leases scanned", str(report.scanned)),
            ("expired", str(report.expired)),
            ("requeued", str(report.requeued)),
            ("dead-lettered", str(report.dead_lettered)),
            ("quarantined", str(report.quarantined)),
            ("skipped", str(report.skipped)),
            ("cleaned up", str(report.cleaned)),
            ("renewed meanwhile", str(report.renewed)),
            ("pass", verdict),
        ]
    )
    ticks = report.schedules
    if ticks is not None and ticks.schedules:
        out.line(
            f"schedules      {ticks.schedules} listed, {ticks.enqueued} tick(s) enqueued"
            + (f", {ticks.failed} failed (retried next pass)" if ticks.failed else "")
        )
    for job_id in ticks.jobs if ticks is not None else ():
        out.line(f"scheduled      {job_id}")
    for job_id in report.requeued_ids:
        out.line(f"requeued       {job_id}")
    for job_id in report.dead_lettered_ids:
        out.line(f"dead-lettered  {job_id}")
    for job_id in report.quarantined_ids:
        out.line(f"quarantined    {job_id}")


@click.command()
@bucket_argument
@click.option(
    "--every",
    type=Seconds(minimum=0.1),
    metavar="SECONDS",
    help="Keep reaping at this interval until Ctrl-C, exit 130 (a local stand-in for the "
    "scheduled reaper).",
)
@click.option("--count", type=click.IntRange(min=1), metavar="N", help="With --every: N passes.")
@global_options
@click.pass_context
def reap(ctx: click.Context, bucket: str | None, every: float | None, count: int | None) -> None:
    """Reclaim expired leases (requeue, or dead-letter when retries are spent) and run due schedules.

    Each pass also enqueues the due ticks of the queue's schedules (`pail
    schedule`), one job per tick however many reapers run: `--every 60` is
    the scheduler outside AWS.

    A lease is expired when its worker has not renewed it for longer than
    the visibility timeout, by the S3 server's clock. Give --visibility-timeout
    (or PAIL_VISIBILITY_TIMEOUT) the same value as your workers.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    passes = 1 if every is None else count
    done = 0
    while passes is None or done < passes:  # Ctrl-C ends it with exit code 130
        if done:
            time.sleep(every or 0)
        report = pail.reap()
        done += 1
        out.result(dataclasses.asdict(report), lambda report=report: render_reap(out, report))
