"""The exit codes of the ``pail`` command, documented in its help and in the README: one table.

``pail work`` and ``pail work-once`` (the Fargate task's command, also run as
``python -m pail.runner``) use three of them, with the meanings the task
relies on (``EXIT_OK``, ``EXIT_ERROR``, ``EXIT_CONFIG``): ``exit_code`` maps a
run's summary to its code, ``worker_exit_code_for`` an error that stopped it.

====  ==========================================================================
0     ``EXIT_OK``: it ran and stopped normally: jobs processed (whatever their
      outcome, which is recorded on each job), the queue was empty
      (``EXIT_EMPTY``, unless ``--empty-exit-code`` says otherwise), a job
      count or time budget was reached, or a signal stopped it cleanly.
1     ``EXIT_ERROR``: S3 kept failing (after botocore's retries) on a claim
      or while a job's outcome was recorded (``work-once``; the summary's
      ``error`` says which), or an unexpected error.
2     ``EXIT_CONFIG``: bad configuration: no bucket, a handler that cannot be
      imported or called, an invalid setting, a missing bucket, denied access.
====  ==========================================================================
"""

from __future__ import annotations

from enum import IntEnum

from pail.drain import StopReason, Tally
from pail.errors import (
    AccessDeniedError,
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
    OUTPUT_CLOSED = 141  # stdout's reader went away (`| head`): 128 + SIGPIPE


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
  141  output closed: the reader of stdout went away (`| head`); nothing is printed
work / work-once: 0, 1 and 2 only, as `pail work --help` says."""

EXIT_OK = ExitCode.OK
EXIT_EMPTY = ExitCode.OK
"""``work-once`` found no job (or the queue is paused). Zero, so a task started for an event that another
worker already served does not count as a failed task; ``--empty-exit-code``
picks another code (e.g. for ``while pail work-once --empty-exit-code 3; do :; done``)."""
EXIT_ERROR = ExitCode.ERROR
EXIT_CONFIG = ExitCode.USAGE

WORKER_HELP = f"""\b
Exit codes:
  {EXIT_OK:d}  ran and stopped normally: jobs processed (each job's outcome is
     recorded on the job), queue empty, a limit reached, or SIGTERM/SIGINT
  {EXIT_ERROR:d}  S3 kept failing after retries (on a claim, or while recording a
     job's outcome), or an unexpected error
  {EXIT_CONFIG:d}  configuration: no bucket or handler, a handler that cannot be
     imported, an invalid setting, a missing bucket, denied access"""

CONFIG_ERRORS = (ConfigurationError, BucketNotFoundError, AccessDeniedError)
"""What stops a worker as configuration (``EXIT_CONFIG``): nothing it can retry fixes them."""


def exit_code(summary: Tally, *, empty: int = EXIT_EMPTY) -> int:
    """The exit code of a worker run that ended with ``summary``.

    >>> exit_code(Tally(0, 0, 0, "empty"), empty=3), exit_code(Tally(1, 0, 1, "max_jobs"))
    (3, <ExitCode.OK: 0>)
    """
    if summary.stop_reason == StopReason.STORAGE_ERROR:
        return EXIT_ERROR
    if summary.processed == 0 and summary.stop_reason in (StopReason.EMPTY, StopReason.PAUSED):
        return empty  # a paused queue has nothing to claim, as far as this run goes
    return EXIT_OK


def worker_exit_code_for(error: PailError) -> int:
    """The exit code of a worker run that an error stopped before it ended.

    >>> worker_exit_code_for(BucketNotFoundError("jobs"))
    <ExitCode.USAGE: 2>
    """
    return EXIT_CONFIG if isinstance(error, CONFIG_ERRORS) else EXIT_ERROR


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
