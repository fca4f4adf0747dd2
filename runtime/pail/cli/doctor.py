"""``pail doctor``: probe an endpoint, bucket and credentials before trusting them."""

from __future__ import annotations

import click
from rich.markup import escape

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import ExitCode
from pail.doctor import DoctorReport, Outcome, run_doctor
from pail.keys import Keys
from pail.output import Output

_STYLES = {
    Outcome.PASS: "green",
    Outcome.WARN: "yellow",
    Outcome.FAIL: "bold red",
    Outcome.SKIP: "dim",
}


def render_report(out: Output, report: DoctorReport) -> None:
    """One line per check, then the verdict."""
    out.line(f"pail doctor: s3://{report.bucket} at {report.endpoint}")
    width = max(len(check.name) for check in report.checks)
    for check in report.checks:
        label = f"{check.outcome.value.upper():<4}"
        style = _STYLES[check.outcome]
        out.print(f"[{style}]{label}[/]  {escape(check.name):<{width}}  {escape(check.detail)}")
    style = "bold red" if not report.ok else "bold green"
    out.print(f"[{style}]verdict:[/] {escape(report.verdict)}")


@click.command()
@bucket_argument
@click.option(
    "--scratch-prefix",
    metavar="PREFIX",
    help="Where the probes write and then delete [default: QUEUE/run/pail-doctor-TOKEN-].",
)
@global_options
@click.pass_context
def doctor(ctx: click.Context, bucket: str | None, scratch_prefix: str | None) -> None:
    """Check that pail can run correctly on this endpoint, bucket and credentials.

    It writes a few objects under a scratch prefix (and deletes them) to test
    create-only PUT, compare-and-swap PUT, conditional DELETE and listings,
    reads a missing key under each state prefix (404, not 403), compares the
    server's clock with this machine's, and, where readable, the bucket's
    lifecycle, CORS and EventBridge settings. About 25 requests.

    Exits 0 when pail can run here (warnings aside), 1 when it cannot.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    # Only the state prefixes, which are the same whatever the shard count: no
    # read of the layout marker before the probes have said whether the bucket is there.
    report = run_doctor(pail.store, Keys(pail.namespace), scratch_prefix=scratch_prefix)
    out.result(report.to_json(), lambda: render_report(out, report))
    if not report.ok:
        raise click.exceptions.Exit(ExitCode.ERROR)
