"""The root ``pail`` group: help, global options, and turning failures into exit codes.

Every error ends the command with one ``error: <cause>`` line on stderr and
the exit code ``exit_codes`` documents; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import traceback
from typing import Any

import click

from pail import __version__
from pail.cli.context import global_options, options
from pail.cli.exit_codes import HELP, ExitCode, exit_code_for
from pail.errors import PailError

DESCRIPTION = """\
Operate a pail queue: a durable job queue in one S3 bucket.

\b
  pail enqueue jobs '{"report_id": "q2"}'   add a job, print its id
  pail status jobs ID                       where a job is, with its last error
  pail result jobs ID --wait --timeout 60   wait for a job's result
  pail stats jobs --watch                   queue depth, live
  pail dlq list jobs                        dead-lettered jobs and their errors
  pail dlq redrive jobs ID                  send a dead job back to the queue
  pail work jobs --handler app:run          run a worker
  pail server / pail demo                   local S3 server / the demo

BUCKET may be left out when PAIL_BUCKET is set. Global options go before or
after the command. Credentials and region come from the usual AWS chain
(environment, --profile, instance role).
"""


class PailGroup(click.Group):
    """A click group that reports errors as one line and exits with a documented code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added: the workflow's order

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except PailError as exc:
            _fail(ctx, exc, str(exc), exit_code_for(exc))
        except KeyboardInterrupt:
            options(ctx).output().note("interrupted")
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None
        except Exception as exc:  # noqa: BLE001 - a bug still gets one line, and --debug
            _fail(ctx, exc, f"unexpected {type(exc).__name__}: {exc}", ExitCode.ERROR)


def _fail(ctx: click.Context, exc: BaseException, message: str, code: int) -> None:
    opts = options(ctx)
    out = opts.output()
    if opts.debug:
        traceback.print_exception(exc)
    out.error(message)
    if code == ExitCode.ERROR and not opts.debug:
        out.note("(run again with --debug for the traceback)")
    raise click.exceptions.Exit(code) from None


@click.group(
    cls=PailGroup,
    help=DESCRIPTION,
    epilog=HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="pail")
@global_options
def cli() -> None:
    """The ``pail`` command."""
