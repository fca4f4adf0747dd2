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
    """No job with this id exists in the queue."""
