"""The exit codes of the ``pail`` command, documented in its help and in the README.

``pail work`` and ``pail work-once`` exit with the runner's codes instead
(``pail.runner``), which the Fargate task definition relies on.
"""

from __future__ import annotations

from enum import IntEnum

from pail.errors import (
    BucketNotFoundError,
    ConfigurationError,
    CredentialsNotFoundError,
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
    JOB_CANCELLED = 6  # the job was cancelled: it will never have a result
    ALREADY_ENDED = 7  # `cancel` came too late: the job had already finished otherwise
    INTERRUPTED = 130  # Ctrl-C


HELP = """\b
Exit codes:
  0    ok
  1    error: storage, access, or unexpected (--debug shows the traceback)
  2    usage or configuration error (bad option, payload, bucket name,
       endpoint URL, no credentials...)
  3    not found: no such job, dead letter or bucket
  4    not ready: the job has no result yet, or `result --wait` timed out
  5    job failed: it was dead-lettered and will never have a result
  6    job cancelled: it will never have a result
  7    too late to cancel: the job had already finished (done or dead-lettered)
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
    if isinstance(error, ConfigurationError | PayloadError | CredentialsNotFoundError):
        return ExitCode.USAGE
    return ExitCode.ERROR


CREDENTIALS_HINT = (
    "give --profile NAME, or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; "
    "`pail server` prints the lines for its local server"
)


def message_for(error: PailError) -> str:
    """The one-line text a ``PailError`` is reported with: hints name the command's options.

    >>> message_for(CredentialsNotFoundError("bucket 'jobs'"))[:68]
    "bucket 'jobs': no AWS credentials found (give --profile NAME, or set"
    """
    if isinstance(error, CredentialsNotFoundError):
        return str(CredentialsNotFoundError(error.where, CREDENTIALS_HINT))
    return str(error)
