"""``pail dashboard``: the local web UI for every queue in a bucket."""

from __future__ import annotations

import threading

import click

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import CommandError
from pail.cli.params import Seconds


@click.command()
@bucket_argument
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port on 127.0.0.1 [default: a free one].",
)
@click.option(
    "--interval",
    type=Seconds(minimum=2.0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh interval; each queue is listed again at most this often.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a browser.")
@global_options
@click.pass_context
def dashboard(
    ctx: click.Context, bucket: str | None, port: int, interval: float, open_browser: bool
) -> None:
    """Serve a web dashboard of every queue in the bucket on 127.0.0.1 (Ctrl-C stops it).

    It shows counts by state, the oldest pending job, throughput, running
    jobs, recent failures, the dead-letter queue (inspect, redrive, delete)
    and a page per job, with your credentials and nothing public. Open the
    printed link: it carries the session's access token. On an idle queue it
    costs about 4 LIST requests per queue per refresh, plus 2 a minute to find
    the queues; every page shows the last minute's count.
    """
    from pail.dashboard import Dashboard, DashboardServer

    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    board = Dashboard(pail.store, interval=interval, shards=pail.explicit_shards)
    try:
        server = DashboardServer(board, port=port).start()
    except OSError as exc:
        raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    out.line(server.url)
    out.note(f"pail dashboard of s3://{pail.bucket} (Ctrl-C stops it)")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    finally:
        server.stop()
