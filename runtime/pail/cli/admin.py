"""Operator commands: ``pail jobs``, ``pail purge`` and ``pail queues``."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.markup import escape

from pail.cli import search as search_flags
from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import CommandError, ExitCode
from pail.operate.jobs import JobPage, JobRow
from pail.operate.objects import JobKind, Reader
from pail.operate.queues import queue_label
from pail.operate.snapshot import take_snapshot
from pail.operate.text import duration, one_line
from pail.output import Column, Output, state_text
from pail.protocol.pause import is_paused
from pail.queue import Pail
from pail.stats import OLDEST_PENDING, STATES


def _row_cells(row: JobRow) -> list[str]:
    detail = row.detail
    attempts = "-" if detail is None or detail.attempts is None else str(detail.attempts)
    if detail is not None and detail.unreadable:
        note = f"unreadable: {detail.unreadable}"
    elif row.foreign:
        note = f"not a job ({row.size} bytes)"
    elif detail is not None and detail.holder is not None:
        progress = "" if detail.progress is None else f" progress {one_line(detail.progress, 40)}"
        note = f"{detail.holder} ({detail.lease_state}){progress}"
    elif detail is not None and detail.error is not None:
        note = one_line(str(detail.error), 80)
    elif row.due_text is not None:
        note = row.due_text
    elif detail is not None and detail.waits_for is not None:
        note = f"waits for {detail.waits_for} of {detail.dependencies} dependencies"
    else:
        note = ""
    label = row.job_id if row.job_id is not None else row.key
    return [
        escape(label),
        state_text(row.state),
        duration(row.age),
        duration(row.in_state),
        attempts,
        escape(note),
    ]


def render_jobs(out: Output, page: JobPage, where: str) -> None:
    if not page.rows:
        out.line(f"no {page.kind.value} jobs in {where}")
    else:
        title = f"{len(page.rows)}{'+' if page.more else ''} {page.kind.value} job(s) in {where}"
        columns = [Column(name) for name in ("id", "state", "age", "in state", "attempts")]
        columns.append(Column("holder / error / due", wrap=True))
        out.table(columns, [_row_cells(row) for row in page.rows], title=escape(title))
    if page.more:
        hint = f" --after {page.next_after}" if page.next_after else ""
        out.note(f"more jobs than shown (a lower bound); next page:{hint} or a larger --limit")


@click.command("jobs")
@bucket_argument
@click.option(
    "--state",
    type=click.Choice([*(kind.value for kind in JobKind), "failed"]),
    default=None,
    help="Which jobs to list (default: pending; searching: any). failed is dead.",
)
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="At most N jobs."
)
@click.option("--after", metavar="KEY", help="Start after this key (a previous page's last).")
@click.option(
    "--no-details",
    is_flag=True,
    help="Skip reading each job's body (attempts, holder, error): LISTs only.",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="KEY=VALUE",
    help="Search: jobs with this tag (repeat: all of them). Answered by the tag index.",
)
@click.option(
    "--since", type=search_flags.Moment(), help="Search: enqueued since (2h, 3d, or ISO 8601)."
)
@click.option(
    "--until", type=search_flags.Moment(), help="Search: enqueued until (an age or ISO 8601)."
)
@click.option("--id-prefix", metavar="PREFIX", help="Search: jobs whose id starts with PREFIX.")
@global_options
@click.pass_context
def list_jobs(
    ctx: click.Context,
    bucket: str | None,
    state: str,
    limit: int,
    after: str | None,
    no_details: bool,
    tags: tuple[str, ...],
    since: Any,
    until: Any,
    id_prefix: str | None,
) -> None:
    """List jobs in one state with their age, oldest first.

    AGE is the time since the job was enqueued; IN STATE the time since its
    object was last written (for a running job: its last lease renewal).
    Objects that are not pail jobs are listed as `foreign`.
    Cost: a LIST per 1,000 keys scanned, a GET per job shown (not with --no-details).

    With --tag, --since, --until or --id-prefix it searches instead (any
    state unless --state), oldest first, and prints what the search cost:

    \b
      pail jobs jobs --tag customer=acme --since 2h --state failed
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    if search_flags.wanted(tags, since, until, id_prefix):
        search_flags.run(
            pail,
            out,
            tags=tags,
            state=state,
            since=since,
            until=until,
            id_prefix=id_prefix,
            limit=limit,
            after=after,
        )
        return
    listed = "dead" if state == "failed" else state or JobKind.PENDING.value
    page = pail.jobs(listed, limit=limit, after=after, details=not no_details)
    where = f"s3://{pail.bucket}/{pail.keys.root}"
    out.result(page.to_json(), lambda: render_jobs(out, page, where))


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on the terminal unless ``yes``; without a terminal, demand --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CommandError(
            f"{question}: pass --yes to confirm (no terminal to ask)", ExitCode.USAGE
        )
    if not click.confirm(question, default=False, err=True):
        raise CommandError("nothing done")


@click.command()
@bucket_argument
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Purge at most N jobs.")
@global_options
@click.pass_context
def purge(ctx: click.Context, bucket: str | None, yes: bool, limit: int | None) -> None:
    """Cancel every pending, delayed and waiting job of the queue; running jobs are never touched.

    Each purged job ends `cancelled`, as with `pail cancel` (a waiting job's
    dependents too). Cost: 4 requests per job (3 per waiting job), plus a
    LIST per 1,000. Interrupted, it leaves every job pending, waiting,
    cancelled, or marked so that no worker runs it: run it again to finish.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    where = f"s3://{pail.bucket}/{pail.keys.root}"
    census = take_snapshot(pail.store, pail.keys, Reader(pail.store)).census
    count = f"{census.pending} pending, {census.delayed} delayed and {census.waiting} waiting"
    confirm(f"cancel {count} job(s) in {where}?", yes)
    report = pail.purge(limit=limit)

    def human() -> None:
        out.line(f"cancelled {len(report.cancelled)} job(s) in {where}")
        if report.skipped:
            out.note(
                f"{len(report.skipped)} left the queue meanwhile (claimed or ended): untouched"
            )
        if report.foreign:
            out.note(
                f"{len(report.foreign)} object(s) under queue/ or wait/ are not jobs: left alone"
            )
        if not report.complete:
            out.note(f"stopped at --limit {limit}; run again for the rest")

    out.result(report.to_json(), human)


@click.command()
@bucket_argument
@global_options
@click.pass_context
def queues(ctx: click.Context, bucket: str | None) -> None:
    """List the queues (namespaces) in the bucket, with their job counts.

    Counts read one page of 1,000 keys per state: `≥` marks a lower bound.
    Cost: 1 LIST for the bucket, 1 per namespace, 4 per queue for the counts,
    and 1 HEAD per queue for its pause marker (`pail pause`).
    """
    opts = options(ctx)
    name = resolve_bucket(bucket)
    pail = opts.connect(name)
    out = opts.output()
    found = pail.queues()
    reader = Reader(pail.store)
    rows = []
    for namespace in found.queues:
        queue = Pail(pail.store, queue=namespace, shards=pail.explicit_shards)
        census = take_snapshot(queue.store, queue.keys, reader).census
        rows.append((namespace, census, is_paused(queue.store, queue.keys)))

    def human() -> None:
        if not rows:
            out.line(f"no pail queue in s3://{name}/")
        # The states under the names and in the order of pail stats and the dashboard.
        names = [*STATES, OLDEST_PENDING, "paused"]
        table = [
            [
                escape(queue_label(namespace)),
                *(str(census.of(state)) for state in STATES),
                duration(census.oldest_pending_age),
                "paused" if paused else "-",
            ]
            for namespace, census, paused in rows
        ]
        if rows:
            columns = [Column("queue"), *(Column(n, justify="right") for n in names)]
            out.table(columns, table, title=f"queues in s3://{name}/")
        if found.foreign:
            shown = ", ".join(one_line(name, 40) for name in found.foreign[:5])
            out.note(f"not queues: {shown}{' ...' if len(found.foreign) > 5 else ''}")

    data = {
        "queues": [
            {"queue": ns, **census.to_json(), "paused": paused} for ns, census, paused in rows
        ],
        "foreign": list(found.foreign),
        "exact": found.exact,
    }
    out.result(data, human)
