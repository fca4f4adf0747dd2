"""The dead-letter queue: ``pail dlq list``, ``show`` and ``redrive``."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from pail.cli.context import (
    bucket_argument,
    checked_id,
    global_options,
    options,
    resolve_bucket,
    split_bucket,
)
from pail.cli.exit_codes import CommandError, ExitCode
from pail.codec import DeadLetter
from pail.errors import DecodeError
from pail.ids import ulid_time, validate_job_id
from pail.output import Column, Output, compact, when
from pail.queue import Pail
from pail.status import locate


def letter_json(letter: DeadLetter) -> dict[str, Any]:
    """A dead letter as JSON: the job, its attempts and the error that killed it."""
    return {
        "id": letter.job_id,
        "payload": letter.payload,
        "attempts": letter.attempts,
        "error": letter.error.to_json() if letter.error else None,
        "enqueued_at": letter.enqueued_at,
        "redriven": letter.redriven,
        "raw": letter.raw,
    }


def read_letter(pail: Pail, job_id: str) -> DeadLetter:
    """The dead letter of ``job_id``, or a not-found error.

    A ``dlq/`` object that is not a dead letter shows as a quarantined one:
    its raw bytes, and why it could not be read.
    """
    job_id = validate_job_id(job_id, stored=True)
    obj = pail.store.get(locate(pail.store, pail.keys, job_id).dlq(job_id))
    if obj is None:
        raise CommandError(
            f"no dead-lettered job {job_id} in s3://{pail.bucket}/{pail.keys.root}",
            ExitCode.NOT_FOUND,
        )
    try:
        return DeadLetter.decode(obj.body, job_id)
    except DecodeError as exc:
        return DeadLetter.unreadable(job_id, obj.body, exc)


@click.group()
def dlq() -> None:
    """Inspect and redrive dead-lettered jobs (those that used up their retries)."""


def render_list(out: Output, letters: list[DeadLetter]) -> None:
    if not letters:
        out.note("the dead-letter queue is empty")
        return
    rows = []
    for letter in letters:
        enqueued = ulid_time(letter.job_id)
        rows.append(
            [
                escape(letter.job_id),
                str(letter.attempts),
                enqueued.strftime("%Y-%m-%d %H:%M") if enqueued else "-",
                escape(compact(str(letter.error) if letter.error else "no error recorded", 120)),
            ]
        )
    out.table(
        [
            Column("id"),
            Column("attempts", justify="right"),
            Column("enqueued"),
            Column("error", style="red", wrap=True),
        ],
        rows,
        title=f"{len(letters)} dead-lettered job(s)",
    )


@dlq.command("list")
@bucket_argument
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Show at most N jobs.")
@global_options
@click.pass_context
def list_(ctx: click.Context, bucket: str | None, limit: int | None) -> None:
    """List dead-lettered jobs with the error that killed each (oldest first)."""
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    letters = pail.dead_letters(limit=limit)
    out.result([letter_json(letter) for letter in letters], lambda: render_list(out, letters))


def render_letter(out: Output, letter: DeadLetter, bucket: str) -> None:
    rows: list[tuple[str, Any]] = [
        ("job", letter.job_id),
        ("state", "[bold red]failed[/] (dead-lettered)"),
        ("attempts", str(letter.attempts)),
        ("enqueued", when(ulid_time(letter.job_id))),
        ("redriven before", str(letter.redriven)),
        ("payload", escape(compact(letter.payload, 400))),
    ]
    if letter.error is not None:
        rows.append(("error", f"[red]{escape(str(letter.error))}[/]"))
    if letter.raw is not None:
        rows.append(("raw object", escape(compact(letter.raw, 400))))
        rows.append(("note", "foreign bytes, quarantined as found: not a job to redrive"))
    out.key_values(rows)
    if letter.error is not None and letter.error.traceback:
        out.print()
        out.line(letter.error.traceback.rstrip())
    if not letter.quarantined:
        out.note(f"retry it: pail dlq redrive {bucket} {letter.job_id}")


@dlq.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@global_options
@click.pass_context
def show(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Show one dead-lettered job: payload, attempts, error and traceback."""
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id, stored=True)
    opts = options(ctx)
    pail = opts.connect(bucket)
    letter = read_letter(pail, job_id)
    out = opts.output()
    out.result(letter_json(letter), lambda: render_letter(out, letter, bucket))


@dlq.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] [ID]")
@click.option("--all", "everything", is_flag=True, help="Redrive every dead-lettered job.")
@global_options
@click.pass_context
def redrive(ctx: click.Context, args: tuple[str, ...], everything: bool) -> None:
    """Send a dead-lettered job (or --all of them) back to the queue with fresh retries.

    The job keeps its id, so `pail status` and `pail result` follow it.
    Exits 3 if ID is not in the dead-letter queue.
    """
    if everything:
        if len(args) > 1:
            raise click.UsageError("--all takes no ID: pail dlq redrive [BUCKET] --all")
        bucket, job_id = resolve_bucket(args[0] if args else None), None
    else:
        bucket, (given,) = split_bucket(args, ["ID"], instead="or give --all")
        job_id = checked_id(given)
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    if job_id is not None:
        read_letter(pail, job_id)  # a clear not-found before anything is written
    ids = pail.redrive(job_id) if job_id is not None else pail.redrive(all=True)

    def human() -> None:
        for redriven in ids:
            out.line(redriven)
        if ids:
            out.note(f"redrove {len(ids)} job(s); they are pending again")
        elif everything:
            out.note("nothing to redrive: the dead-letter queue is empty")
        else:
            out.note(f"job {job_id} was already pending again; nothing to do")

    out.result({"redriven": ids}, human)


@dlq.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@global_options
@click.pass_context
def delete(ctx: click.Context, args: tuple[str, ...], yes: bool) -> None:
    """Delete one dead-lettered job's record; the job stays ended (failed).

    The record is deleted only if it is still the one just read (a
    conditional delete). The job's dead marker under done/ stays, so its
    status stays `failed` and nothing runs it again. Exits 3 if ID is not in
    the dead-letter queue.
    """
    from pail.cli.admin import confirm
    from pail.operate.dead_letters import read_letter as read_record

    bucket, (given,) = split_bucket(args, ["ID"])
    job_id = checked_id(given, stored=True)
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    # What is about to go (readable or not), and its ETag for the conditional delete.
    record = read_record(pail.store, pail.keys, job_id)
    if record is None:
        raise CommandError(
            f"no dead-lettered job {job_id} in s3://{pail.bucket}/{pail.keys.root}",
            ExitCode.NOT_FOUND,
        )
    detail = record.detail
    error = detail.unreadable or (str(detail.error) if detail.error else "no error recorded")
    confirm(f"delete dead letter {job_id} ({compact(error, 60)})?", yes)
    if not pail.delete_dead_letter(job_id, etag=record.etag):
        raise CommandError(f"dead letter {job_id} changed meanwhile; look again (pail dlq show)")
    out.result({"deleted": job_id}, lambda: out.line(f"deleted dead letter {job_id}"))
