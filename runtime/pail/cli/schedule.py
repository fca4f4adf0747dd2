"""``pail schedule add|list|remove``: cron and fixed-interval jobs (``pail.protocol.schedules``).

The ticks are run by the reaper's pass: the deployed reaper Lambda, or
``pail reap --every 60`` outside AWS (``docs/schedules.md``).
"""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket, split_bucket
from pail.cli.exit_codes import CommandError, ExitCode
from pail.cli.jobs import read_payloads
from pail.cli.params import Seconds
from pail.output import Column, Output, compact
from pail.protocol.schedules import ScheduleInfo
from pail.protocol.schedules.timing import MAX_EVERY


@click.group()
def schedule() -> None:
    """Cron and fixed-interval jobs: one job per tick, run by `pail reap` or the reaper Lambda."""


@schedule.command("add")
@click.argument("args", nargs=-1, metavar="[BUCKET] NAME JSON|@FILE|-")
@click.option("--cron", metavar="EXPR", help='5 fields ("0 2 * * *") or an alias such as @daily.')
@click.option(
    "--every",
    type=Seconds(minimum=1, maximum=MAX_EVERY),
    metavar="SECONDS",
    help="A fixed interval instead of --cron (ticks on multiples of it since the epoch).",
)
@click.option(
    "--timezone", default="UTC", show_default=True, help="IANA time zone --cron is read in."
)
@click.option(
    "--catch-up",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="After a gap, enqueue the latest N missed ticks (1: only the latest).",
)
@global_options
@click.pass_context
def add(
    ctx: click.Context,
    args: tuple[str, ...],
    cron: str | None,
    every: float | None,
    timezone: str,
    catch_up: int,
) -> None:
    """Create or replace schedule NAME, which enqueues the payload at each tick.

    \b
      pail schedule add jobs nightly-report '{"report": "regions"}' --cron "0 2 * * *" --timezone Europe/Berlin
      pail schedule add jobs heartbeat '{}' --every 900
    """
    bucket, (name, source) = split_bucket(args, ["NAME", "PAYLOAD"])
    payloads = read_payloads(source, lines=False)
    if len(payloads) != 1:
        raise CommandError("a schedule takes exactly one payload", ExitCode.USAGE)
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    info = pail.schedule(
        name, payloads[0], cron=cron, every=every, timezone=timezone, catch_up=catch_up
    )
    out.result(
        info.to_json(),
        lambda: out.line(f"{info.name}: {info.schedule.timing.text}, next {_when(info)}"),
    )


@schedule.command("list")
@bucket_argument
@global_options
@click.pass_context
def list_schedules(ctx: click.Context, bucket: str | None) -> None:
    """The schedules with their next due time and the last job each enqueued.

    Cost: 1 LIST and 1 GET per schedule.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    infos = pail.schedules()
    out.result([info.to_json() for info in infos], lambda: render_list(out, infos))


@schedule.command("pause")
@click.argument("args", nargs=-1, metavar="[BUCKET] NAME")
@global_options
@click.pass_context
def pause(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Pause schedule NAME: no tick enqueues a job until `pail schedule resume`."""
    _set_paused(ctx, args, paused=True)


@schedule.command("resume")
@click.argument("args", nargs=-1, metavar="[BUCKET] NAME")
@global_options
@click.pass_context
def resume(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Resume schedule NAME from its next tick (the ticks of the pause are not enqueued)."""
    _set_paused(ctx, args, paused=False)


def _set_paused(ctx: click.Context, args: tuple[str, ...], *, paused: bool) -> None:
    bucket, (name,) = split_bucket(args, ["NAME"])
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    info = pail.pause_schedule(name, paused=paused)
    if info is None:
        raise CommandError(
            f"no schedule {name!r} in s3://{pail.bucket}/{pail.keys.root}", ExitCode.NOT_FOUND
        )
    state = "paused" if paused else f"resumed, next {_when(info)}"
    out.result(info.to_json(), lambda: out.line(f"{info.name}: {state}"))


@schedule.command("remove")
@click.argument("args", nargs=-1, metavar="[BUCKET] NAME")
@global_options
@click.pass_context
def remove(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Remove schedule NAME; the jobs it already enqueued stay."""
    bucket, (name,) = split_bucket(args, ["NAME"])
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    if not pail.unschedule(name):
        raise CommandError(
            f"no schedule {name!r} in s3://{pail.bucket}/{pail.keys.root}", ExitCode.NOT_FOUND
        )
    out.result({"name": name, "removed": True}, lambda: out.line(f"removed {name}"))


def render_list(out: Output, infos: list[ScheduleInfo]) -> None:
    """The schedules as a table, or a note that there are none."""
    if not infos:
        out.note("no schedules (pail schedule add makes one)")
        return
    rows: list[list[str]] = []
    for info in infos:
        rows.append(
            [
                escape(info.name),
                escape(info.schedule.timing.text),
                "paused" if info.schedule.paused else _when(info),
                escape(info.last_job or "-"),
                escape(compact(_payload(info.schedule.payload), 60)),
            ]
        )
    out.table(
        [Column("name"), Column("when"), Column("next"), Column("last job"), Column("payload")],
        rows,
    )


def _when(info: ScheduleInfo) -> str:
    return info.next_due.strftime("%Y-%m-%d %H:%M:%S UTC")


def _payload(payload: Any) -> str:
    import json

    return json.dumps(payload, separators=(",", ":"))
