"""The exit codes of the ``pail`` command, documented in its help and in the README.

``pail work`` and ``pail work-once`` exit with the runner's codes instead
(``pail.runner``), which the Fargate task definition relies on.
"""

from __future__ import annotations

from enum import IntEnum

from pail.errors import (
    BucketNotFoundError,
    ConfigurationError,
    JobNotFoundError,
    PailError,
    PayloadError,
)


class ExitCode(IntEnum):
    """What a ``pail`` command's exit status means."""

    OK = 0
    ERROR = 1  # storage or access error, or an unexpected failure
    USAGE = 2  # bad arguments, bad payload, bad configuration
    NOT_FOUND = 3  # no such job, dead letter or bucket
    NOT_READY = 4  # the job has no result yet (or `result --wait` timed out)
    JOB_FAILED = 5  # the job was dead-lettered: it will never have a result
    INTERRUPTED = 130  # Ctrl-C


HELP = """\b
Exit codes:
  0    ok
  1    error: storage, access, or unexpected (--debug shows the traceback)
  2    usage or configuration error (bad option, payload, bucket name...)
  3    not found: no such job, dead letter or bucket
  4    not ready: the job has no result yet, or `result --wait` timed out
  5    job failed: it was dead-lettered and will never have a result
  130  interrupted (Ctrl-C)
work / work-once exit with the runner's codes: see `pail work --help`."""


class CommandError(PailError):
    """A command's own failure, with the exit code it ends with."""

    def __init__(self, message: str, code: int = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(error: PailError) -> int:
    """The exit code a ``PailError`` ends the command with.

    >>> exit_code_for(JobNotFoundError("x"))
    <ExitCode.NOT_FOUND: 3>
    """
    if isinstance(error, CommandError):
        return error.code
    if isinstance(error, JobNotFoundError | BucketNotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(error, ConfigurationError | PayloadError):
        return ExitCode.USAGE
    return ExitCode.ERROR
