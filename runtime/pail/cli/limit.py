"""``pail limit show|concurrency|rate|clear``: a queue's concurrency and rate limits (``docs/limits.md``).

The limits live in the bucket (``_pail/limits``), so every worker and entry
point honours them, whatever started it; a change reaches each worker
within ``limits.gate.REFRESH`` seconds, a first limit on a queue that had
none within ``limits.gate.ABSENT_REFRESH`` (plus the life of its page).
"""

from __future__ import annotations

from typing import Any

import click

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket, split_bucket
from pail.cli.exit_codes import CommandError, ExitCode
from pail.errors import ConfigurationError
from pail.operate.limits import limit_lines, limits_json, read_rates
from pail.output import Output
from pail.protocol.limits.groups import DEFAULT
from pail.protocol.limits.rate import Rate
from pail.queue import Pail

NONE = "none"
GROUP_HELP = (
    f"A group's own limit (NAME), or every group's without one ('{DEFAULT}'). Default: the queue's."
)


@click.group()
def limit() -> None:
    """A queue's limits: jobs running at once, starts per period; queue-wide or per group."""


@limit.command("show")
@bucket_argument
@global_options
@click.pass_context
def show(ctx: click.Context, bucket: str | None) -> None:
    """The queue's limits. Cost: 1 GET (`_pail/limits`)."""
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    _print(opts.output(), pail)


@limit.command("concurrency")
@click.argument("args", nargs=-1, metavar="[BUCKET] N|none")
@click.option("--group", metavar="NAME|*", help=GROUP_HELP)
@global_options
@click.pass_context
def concurrency(ctx: click.Context, args: tuple[str, ...], group: str | None) -> None:
    """At most N jobs running at once (`none` removes the limit).

    \b
      pail limit concurrency jobs 5                 5 exports at a time, across every worker
      pail limit concurrency jobs 2 --group '*'     no tenant runs more than 2 at once
      pail limit concurrency jobs 10 --group big    ... except tenant "big"
    """
    bucket, (value,) = split_bucket(args, ["N"])
    count = None if value.lower() == NONE else _count(value)
    opts = options(ctx)
    pail = opts.connect(bucket)
    _changed(lambda: pail.set_limit(count, group=group))
    _print(opts.output(), pail)


@limit.command("rate")
@click.argument("args", nargs=-1, metavar="[BUCKET] COUNT/PERIOD|none")
@click.option("--group", metavar="NAME|*", help=GROUP_HELP)
@global_options
@click.pass_context
def rate(ctx: click.Context, args: tuple[str, ...], group: str | None) -> None:
    """At most COUNT job starts per PERIOD (`10/s`, `1000/h`, `5/2s`; `none` removes it).

    A fixed window of the bucket's clock: no window grants more starts
    (docs/limits.md, "Rate limits"). Cost at claim time: 1 PUT per start.

    \b
      pail limit rate jobs 10/s                 10 calls a second to a partner API
      pail limit rate jobs 100/min --group '*'  per tenant
    """
    bucket, (value,) = split_bucket(args, ["RATE"])
    try:
        parsed = None if value.lower() == NONE else Rate.parse(value)
    except ConfigurationError as exc:
        raise CommandError(str(exc), ExitCode.USAGE) from exc
    opts = options(ctx)
    pail = opts.connect(bucket)
    _changed(lambda: pail.set_rate(parsed, group=group))
    _print(opts.output(), pail)


@limit.command("clear")
@bucket_argument
@global_options
@click.pass_context
def clear(ctx: click.Context, bucket: str | None) -> None:
    """Remove every limit of the queue (concurrency and rates). Cost: 1 HEAD, 1 DELETE."""
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    removed = pail.clear_limits()
    out.result(
        {"changed": removed},
        lambda: out.line("limits removed" if removed else "the queue had no limits"),
    )


@limit.command("sweep")
@bucket_argument
@click.option(
    "--max-deletes",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Delete at most this many tokens this run.",
)
@global_options
@click.pass_context
def sweep(ctx: click.Context, bucket: str | None, max_deletes: int) -> None:
    """Delete the start tokens of rate windows that are over (`_pail/rate/`).

    A bucket the construct made expires them by a lifecycle rule; elsewhere
    run this now and then (cron, or beside `pail reap --every`). Cost: 1
    LIST per 1,000 tokens, 1 DELETE per token of a past window.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    report = pail.sweep_rate_tokens(max_deletes=max_deletes)
    data = {
        "deleted": report.deleted,
        "lists": report.lists,
        "foreign": report.foreign,
        "more": report.more,
    }
    more = " (more left: run it again)" if report.more else ""
    out.result(data, lambda: out.line(f"deleted {report.deleted} past rate tokens{more}"))


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise CommandError(
            f"N must be a whole number or 'none', got {text!r}", ExitCode.USAGE
        ) from None
    return value


def _changed(change: Any) -> None:
    try:
        change()
    except ConfigurationError as exc:
        raise CommandError(str(exc), ExitCode.USAGE) from exc


def _print(out: Output, pail: Pail) -> None:
    limits = pail.limits()
    rates = read_rates(limits)

    def human() -> None:
        for line in limit_lines(limits, rates):
            out.line(line)

    out.result(limits_json(limits, rates), human)
