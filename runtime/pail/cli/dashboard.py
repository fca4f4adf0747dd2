"""``pail dashboard``: the local web UI for every queue in a bucket."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.cli.exit_codes import CommandError
from pail.cli.params import Seconds

if TYPE_CHECKING:
    from pail.dashboard import DashboardServer
    from pail.output import Output


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
    printed link: it opens one session, once, within 5 minutes; press Enter
    for a new link (another browser, or a late one). On an idle queue it
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
    out.line(server.link())
    out.note(
        f"pail dashboard of s3://{pail.bucket}: each link opens one session, once, within "
        "5 minutes; Enter prints a new one (Ctrl-C stops it)"
    )
    if sys.stdin is not None and sys.stdin.isatty():
        # Run in the background (`pail dashboard &`), a read of the terminal would stop the
        # whole process (SIGTTIN); ignored, the read fails instead and only Enter stops working.
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)
    threading.Thread(target=_new_links, args=(server, out), daemon=True).start()
    folder = None
    # SIGTERM ends it like Ctrl-C does, through the finally below (the redirect file goes).
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        if open_browser:
            import webbrowser

            folder = Path(tempfile.mkdtemp(prefix="pail-dashboard-"))
            webbrowser.open(write_redirect_file(folder, server.link()).as_uri())
        threading.Event().wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _new_links(server: DashboardServer, out: Output) -> None:
    """Print a new one-time link for each line read on stdin (Enter), until it closes."""
    try:
        for _ in sys.stdin:
            out.line(server.link())
    except (OSError, ValueError):  # a terminal we may not read (in the background), a closed stdin
        return


def write_redirect_file(folder: Path, link: str) -> Path:
    """A page that sends the browser on to ``link``, readable by this user only.

    The browser is started with this file's path, not the link: a browser's
    command line is readable by every user of the machine (``/proc/PID/cmdline``),
    a 0600 file in a 0700 folder (``mkdtemp``) is not. The token in it opens
    one session, once, so the file is worth nothing after the browser used it.
    """
    path = folder / "open.html"
    target = escape(link, quote=True)
    html = (
        '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0;url={target}">'
        f'<title>pail dashboard</title><a href="{target}">Open the pail dashboard</a>\n'
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(html)
    return path
