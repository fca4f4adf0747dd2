"""No AWS needed: ``pail server`` (the embedded S3 server) and ``pail demo``."""

from __future__ import annotations

import click

from pail.cli.context import global_options, options
from pail.cli.exit_codes import CommandError, ExitCode
from pail.config import ENV_ENDPOINT_URL
from pail.local import ACCESS_KEY, LOOPBACK, REGION, SECRET_KEY


def local_env_lines(endpoint_url: str) -> list[str]:
    """Shell lines that point the AWS SDK and ``pail`` at a local server.

    >>> local_env_lines("http://127.0.0.1:9000")[-1]
    'export PAIL_ENDPOINT_URL=http://127.0.0.1:9000'
    """
    return [
        f"export AWS_ACCESS_KEY_ID={ACCESS_KEY} AWS_SECRET_ACCESS_KEY={SECRET_KEY}",
        f"export AWS_REGION={REGION}",
        f"export {ENV_ENDPOINT_URL}={endpoint_url}",
    ]


@click.command()
@click.option("--host", default=LOOPBACK, show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=9000, show_default=True, help="Port."
)
@global_options
@click.pass_context
def server(ctx: click.Context, host: str, port: int) -> None:
    """Run the embedded local S3 server in the foreground (Ctrl-C stops it).

    It is moto's S3 with every write serialised, so conditional writes are
    atomic as on S3. Nothing is persisted: buckets vanish when it stops.
    Create a bucket with `aws --endpoint-url ... s3 mb s3://jobs`, or from
    Python with boto3.
    """
    from pail.local import serve

    out = options(ctx).output()
    endpoint = f"http://{host}:{port}"
    out.note("point pail and the AWS SDK at it with:")
    for line in local_env_lines(endpoint):
        out.note(f"  {line}")
    try:
        serve(host, port)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc}") from exc
    except ImportError as exc:
        raise CommandError(
            f"the local server needs moto: pip install 'pailq[local]' ({exc})", ExitCode.USAGE
        ) from exc
