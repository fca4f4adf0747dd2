"""No AWS needed: ``pail server`` (the embedded S3 server) and ``pail demo``."""

from __future__ import annotations

import importlib.util
import socket

import click

from pail.cli.context import global_options, options
from pail.cli.exit_codes import CommandError, ExitCode
from pail.cli.params import Seconds
from pail.local import CORS_METHODS, LOOPBACK, local_env_lines


def should_hold(flag: bool | None, *, interactive: bool, json_mode: bool) -> bool:
    """Whether the demo keeps its server up after the summary: as asked, else only for a person.

    >>> should_hold(None, interactive=False, json_mode=False)
    False
    """
    if flag is not None:
        return flag
    return interactive and not json_mode


LOCAL_EXTRA_MODULES = ("moto", "werkzeug")
"""What the embedded S3 server imports: the ``local`` extra."""


def require_local_extra(command: str) -> None:
    """A clear error, before anything starts, when the ``local`` extra is not installed."""
    missing = [name for name in LOCAL_EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise CommandError(
            f"pail {command} runs the embedded S3 server, which needs the local extra "
            f"({', '.join(missing)} not installed): pip install 'pailq[local]'",
            ExitCode.USAGE,
        )


def _check_free(host: str, port: int) -> None:
    """A clear error for a busy port (werkzeug would print its own advice and exit)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@click.command()
@click.option("--host", default=LOOPBACK, show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9000,
    show_default=True,
    help="Port; 0 takes any free one (the line it prints names it).",
)
@click.option(
    "--bucket",
    "buckets",
    multiple=True,
    metavar="NAME",
    help="Create this bucket once the server listens (repeat for more).",
)
@click.option(
    "--cors-method",
    "cors_methods",
    multiple=True,
    type=click.Choice(CORS_METHODS, case_sensitive=False),
    help="Let browser pages send this method too, e.g. PUT (repeat for more) [default: GET, HEAD].",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Let pages from this origin use the server ('*': any) [default: pages on this machine].",
)
@global_options
@click.pass_context
def server(
    ctx: click.Context,
    host: str,
    port: int,
    buckets: tuple[str, ...],
    cors_methods: tuple[str, ...],
    cors_origins: tuple[str, ...],
) -> None:
    """Run the embedded local S3 server in the foreground (Ctrl-C stops it).

    It is moto's S3 with every write serialised, so conditional writes are
    atomic as on S3. Nothing is persisted: buckets vanish when it stops.
    `--bucket jobs` creates a bucket as it starts, so nothing else is needed:

    \b
      pail server --bucket jobs

    It checks no signature, so browser pages are held to what the status
    page needs: GET and HEAD, from pages served on this machine. Any other
    request that carries a page's Origin is refused (403), so a web page
    you visit cannot write or delete the bucket's objects; on a loopback
    address, so is a request addressed to another host name (DNS rebinding).
    """
    from pail.local import CorsPolicy, serve
    from pail.store.s3 import validate_bucket_name

    require_local_extra("server")
    cors = CorsPolicy.of(cors_methods, cors_origins)
    for bucket in buckets:
        validate_bucket_name(bucket)
    out = options(ctx).output()
    _check_free(host, port)

    def listening(endpoint: str) -> None:
        out.note("point pail and the AWS SDK at it with:")
        for line in local_env_lines(endpoint):
            out.note(f"  {line}")
        if len(buckets) == 1:
            out.note(f"  export PAIL_BUCKET={buckets[0]}")

    try:
        serve(host, port, buckets=buckets, on_listening=listening, cors=cors)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc}") from exc
    except ImportError as exc:
        raise CommandError(
            f"the local server needs moto: pip install 'pailq[local]' ({exc})", ExitCode.USAGE
        ) from exc


@click.command()
@click.option("--jobs", type=click.IntRange(min=10, max=5000), default=200, show_default=True)
@click.option("--workers", type=click.IntRange(min=2, max=16), default=4, show_default=True)
@click.option(
    "--lease",
    "visibility_timeout",
    type=Seconds(minimum=1.0, maximum=30.0),
    default=3.0,
    show_default=True,
    metavar="SECONDS",
    help="The workers' visibility timeout: how soon a killed worker's lease expires.",
)
@click.option("--port", type=click.IntRange(0, 65535), help="Server port [default: a free one].")
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the job batch.")
@click.option(
    "--hold/--no-hold",
    default=None,
    help="Keep the server up after the summary until Enter [default: when on a terminal].",
)
@click.option(
    "--open-status",
    is_flag=True,
    help="Open the killed job's browser status page at the end (keeps the server up).",
)
@global_options
@click.pass_context
def demo(
    ctx: click.Context,
    jobs: int,
    workers: int,
    visibility_timeout: float,
    port: int | None,
    seed: int,
    hold: bool | None,
    open_status: bool,
) -> None:
    """Run the queue end to end on this machine: no AWS account, no internet.

    Starts the embedded S3 server, enqueues a batch of report and simulation
    jobs (a few flaky, one poison), runs worker processes and the reaper,
    kills one worker mid-job, and shows every job accounted for. Exits 1 if
    any job is unaccounted for.
    """
    import sys

    from pail.demo.run import DemoOptions, run_demo

    require_local_extra("demo")
    opts = options(ctx)
    hold = open_status or should_hold(
        hold, interactive=sys.stdin.isatty() and sys.stdout.isatty(), json_mode=opts.json
    )
    run_demo(
        DemoOptions(
            jobs=jobs,
            workers=workers,
            visibility_timeout=visibility_timeout,
            port=port,
            seed=seed,
            hold=hold,
            open_status=open_status,
        ),
        opts.output(),
    )
