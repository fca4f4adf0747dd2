"""Commands for the features beyond the original: ``cancel``."""

from __future__ import annotations

import click

from pail.cli.context import checked_id, global_options, options, split_bucket
from pail.cli.exit_codes import CommandError, ExitCode
from pail.errors import JobNotFoundError
from pail.status import JobState


@click.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@global_options
@click.pass_context
def cancel(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Cancel a job: a pending job never runs; a running one stops being renewed.

    A running job's worker learns it at its next heartbeat, and its result is
    not recorded. Cancelling a cancelled job again changes nothing and says
    so. Exits 0 when the job is cancelled (now or before), 3 if no job has
    this id, 7 if it had already finished (done or dead-lettered): nothing
    is changed then.
    """
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id)
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    before = pail.status(job_id)
    if before is not None and before.state is JobState.CANCELLED:
        # A cancellation is final: nothing to write, and the user should know.
        data = {"id": job_id, "cancelled": True, "already": True, "state": "cancelled"}
        out.result(data, lambda: out.line(f"{job_id} was already cancelled"))
        return
    try:
        cancelled = pail.cancel(job_id)
    except JobNotFoundError:
        raise CommandError(
            f"no job {job_id} in s3://{pail.bucket}/{pail.keys.root} "
            "(wrong bucket or --queue, or its objects expired?)",
            ExitCode.NOT_FOUND,
        ) from None
    if cancelled:
        data = {"id": job_id, "cancelled": True, "already": False, "state": "cancelled"}
        out.result(data, lambda: out.line(f"cancelled {job_id}"))
        return
    after = pail.status(job_id)
    state = after.state.value if after is not None else "ended"
    raise CommandError(
        f"job {job_id} had already finished ({state}); nothing was cancelled",
        ExitCode.ALREADY_ENDED,
    )
