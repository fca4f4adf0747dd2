"""Commands for the features beyond the original: ``cancel``."""

from __future__ import annotations

import click

from pail.cli.context import checked_id, global_options, options, split_bucket


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[BUCKET] ID")
@global_options
@click.pass_context
def cancel(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Cancel a job: a pending job never runs; a running one stops being renewed.

    A running job's worker learns it at its next heartbeat, and its result is
    not recorded. A job that had already ended is left as it is (the output
    says so). Exits 3 if no job has this id.
    """
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id)
    opts = options(ctx)
    pail = opts.connect(bucket)
    cancelled = pail.cancel(job_id)
    out = opts.output()
    status = pail.status(job_id)
    state = status.state.value if status is not None else "unknown"
    text = f"cancelled {job_id}" if cancelled else f"{job_id} had already ended ({state})"
    out.result({"id": job_id, "cancelled": cancelled, "state": state}, lambda: out.line(text))
