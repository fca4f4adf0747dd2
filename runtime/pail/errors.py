"""The exceptions pail raises. Every one derives from ``PailError``.

Raw ``botocore`` errors never leave the S3 store: it translates them here, at
the edge, so callers handle one hierarchy whatever the backend.
"""

from __future__ import annotations


class PailError(Exception):
    """Root of every error pail raises."""


class ConfigurationError(PailError, ValueError):
    """A setting is invalid: a bucket name, a namespace, a timeout."""


class BucketNotFoundError(PailError):
    """The bucket does not exist (or is not visible with these credentials)."""


class AccessDeniedError(PailError):
    """The credentials are missing, invalid, or not allowed to do this."""


class CredentialsNotFoundError(AccessDeniedError):
    """No AWS credentials were found: boto3's chain (environment, profile, role) came up empty.

    ``where`` names the bucket and endpoint; the message ends with a hint for
    Python callers, which the ``pail`` command replaces with its options.
    """

    HINT = (
        "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "or pass access_key_id= and secret_access_key= to Pail.connect"
    )

    def __init__(self, where: str, hint: str = HINT) -> None:
        super().__init__(f"{where}: no AWS credentials found ({hint})")
        self.where = where


class StorageError(PailError):
    """The storage service failed in a way retries did not fix."""


class ConditionFailedError(StorageError):
    """A conditional write lost: the object exists, changed, or is missing.

    ``missing`` is True when the condition failed because the object does not
    exist (S3 answers 404 for ``If-Match`` on a missing key; some servers 412).
    ``retried`` is False only when the store knows the request was sent once:
    then the failure cannot be against a write of the caller's own.
    """

    def __init__(self, key: str, *, missing: bool = False, retried: bool = True) -> None:
        super().__init__(f"condition failed on {key!r}" + (" (missing)" if missing else ""))
        self.key = key
        self.missing = missing
        self.retried = retried


class ConflictError(StorageError):
    """409 ConditionalRequestConflict kept coming back after retries."""


class EnqueueUnknownError(StorageError):
    """S3 failed after an enqueue's write was sent: the job may exist, under ``job_id``.

    Its response was lost and the write sent again could not settle it
    either. Never enqueue the payload again as a new job: send it again under
    this id, ``pail.enqueue_many([payload], ids=[error.job_id])``, which a
    job already there counts as enqueued.
    """

    def __init__(self, job_id: str, cause: BaseException) -> None:
        super().__init__(
            f"job {job_id} may have been enqueued (S3 failed after the write was sent: "
            f"{cause}); send it again under this id, never as a new job"
        )
        self.job_id = job_id


class PayloadError(PailError, TypeError):
    """A payload or a result cannot be encoded as JSON."""


class DecodeError(PailError, ValueError):
    """An object under a queue prefix is not a valid pail job."""


class LeaseLostError(PailError):
    """This worker no longer owns the job's lease: another worker or the reaper took it."""


class JobNotFoundError(PailError, KeyError):
    """No job with this id exists in the queue.

    Its text is the message as written: ``KeyError`` alone would quote it.

    >>> str(JobNotFoundError("no job 01J to cancel"))
    'no job 01J to cancel'
    """

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()
