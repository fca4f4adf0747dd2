"""The root ``pail`` group: help, global options, and turning failures into exit codes.

Every error ends the command with one ``error: <cause>`` line on stderr and
the exit code ``exit_codes`` documents; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import IO, Any

import click

from pail import __version__
from pail.cli.context import global_options, options
from pail.cli.exit_codes import HELP, ExitCode, exit_code_for, message_for
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


class ShortUsageError(click.UsageError):
    """A usage error told briefly: one line off a terminal, two on one (the error, then the usage).

    click's own takes four lines (usage, a hint, a blank line, the error)
    and puts the cause last, where a log reader looks least.
    """

    @classmethod
    def of(cls, error: click.UsageError) -> ShortUsageError:
        if isinstance(error, cls):
            return error
        return cls(error.format_message(), error.ctx)

    def show(self, file: IO[Any] | None = None) -> None:
        file = file if file is not None else sys.stderr
        error = click.style("error:", fg="red", bold=True)
        if self.ctx is None:
            click.echo(f"{error} {self.message}", file=file)
            return
        # The command's usage on one line, e.g. `pail enqueue [OPTIONS] [BUCKET] JSON|@FILE|-`.
        path = self.ctx.command_path
        usage = " ".join([path, *self.ctx.command.collect_usage_pieces(self.ctx)])
        if _is_terminal(file):
            click.echo(f"{error} {self.message}", file=file)
            click.echo(
                click.style(f"usage: {usage}   ({path} --help for more)", dim=True), file=file
            )
        else:
            click.echo(f"{error} {self.message} (usage: {usage})", file=file)


def _is_terminal(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _shortened(error: click.UsageError) -> click.UsageError:
    # click's "no arguments: show the help" is a usage error whose show() prints the help.
    if isinstance(error, click.exceptions.NoArgsIsHelpError):
        return error
    return ShortUsageError.of(error)


class PailGroup(click.Group):
    """A click group that reports errors as one line and exits with a documented code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they were added: the workflow's order

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _shortened(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _shortened(exc) from None
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except PailError as exc:
            _fail(ctx, exc, message_for(exc), exit_code_for(exc))
        except KeyboardInterrupt:
            options(ctx).output().note("interrupted")
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None
        except BrokenPipeError:
            silence_stdout()
            raise click.exceptions.Exit(ExitCode.OUTPUT_CLOSED) from None
        except Exception as exc:  # noqa: BLE001 - a bug still gets one line, and --debug
            _fail(ctx, exc, f"unexpected {type(exc).__name__}: {exc}", ExitCode.ERROR)


def silence_stdout() -> None:
    """Point stdout at /dev/null: its reader went away (``| head``), a normal end.

    What is still buffered is then flushed there, so the interpreter's final
    flush does not fail a second time ("Exception ignored ... BrokenPipeError").
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test runner's stream): nothing to do
        pass


def _fail(ctx: click.Context, exc: BaseException, message: str, code: int) -> None:
    opts = options(ctx)
    out = opts.output()
    if opts.debug:
        traceback.print_exception(exc)
    if code == ExitCode.ERROR and not opts.debug:
        message = f"{message} (--debug shows the traceback)"
    out.error(message)
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
