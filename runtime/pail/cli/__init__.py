"""The ``pail`` command: operate a queue from a shell, run workers, run the demo.

``main`` is the console script (``[project.scripts] pail``); ``cli`` is the
click group, for ``click.testing.CliRunner`` and for embedding.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pail.cli.admin import list_jobs, purge, queues
from pail.cli.app import cli, silence_stdout
from pail.cli.dashboard import dashboard
from pail.cli.dlq import dlq
from pail.cli.doctor import doctor
from pail.cli.exit_codes import ExitCode
from pail.cli.features import cancel
from pail.cli.jobs import enqueue, result, status, url
from pail.cli.limit import limit
from pail.cli.local import demo, server
from pail.cli.operate import reap, stats
from pail.cli.pause import pause, resume
from pail.cli.schedule import schedule
from pail.cli.workers import work, work_once

for command in (
    enqueue,
    status,
    result,
    url,
    cancel,
    stats,
    list_jobs,
    queues,
    purge,
    pause,
    resume,
    limit,
    dlq,
    dashboard,
    reap,
    schedule,
    work,
    work_once,
    doctor,
    server,
    demo,
):
    cli.add_command(command)


def main() -> None:
    """Run the ``pail`` command with ``sys.argv``; exits with a documented code.

    A reader of stdout that goes away (``pail dlq list jobs | head``) ends any
    command quietly with ``ExitCode.OUTPUT_CLOSED``: while it runs (``cli``
    turns it into that exit) or while its last output is flushed here.
    """
    try:
        try:
            cli(prog_name="pail")
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        sys.exit(ExitCode.OUTPUT_CLOSED)


def run_command(args: Sequence[str], *, prog_name: str = "pail") -> int:
    """Run ``pail ARGS...`` in this process; return its exit code instead of exiting."""
    try:
        cli.main(args=list(args), prog_name=prog_name)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


__all__ = ["cli", "main", "run_command"]
