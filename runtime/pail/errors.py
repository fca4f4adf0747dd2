"""The exceptions pail raises. Every one derives from ``PailError``.

Raw ``botocore`` errors never leave the S3 store: it translates them here, at
the edge, so callers handle one hierarchy whatever the backend.
"""

from __future__ import annotations

from datetime import datetime


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


class ObjectTooLargeError(PailError):
    """An object is larger than the reader agreed to read (``BoundedGetter.get_bounded``).

    What the GET's headers said comes with it (size, ETag, last change); the
    body was not read.
    """

    def __init__(
        self, key: str, *, size: int, etag: str, last_modified: datetime, limit: int
    ) -> None:
        super().__init__(f"{key!r} is {size} bytes, more than the {limit} read at most")
        self.key = key
        self.size = size
        self.etag = etag
        self.last_modified = last_modified
        self.limit = limit


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


class BatchEnqueueError(PailError):
    """Some items of an ``enqueue_many`` were not (surely) enqueued; the others were.

    * ``ids``: one entry per payload, in order: the job id of each item that
      was enqueued, None for the others.
    * ``errors``: each item not known to be enqueued, by index, with its exception.
    * ``unknown``: among those, the items that **may** have been enqueued (S3
      failed after their write was sent), with the id each may exist under.
    * ``failed_indices``: the items surely not enqueued (``errors`` minus
      ``unknown``). Re-send them as new jobs.
    * ``unknown_indices``: re-send those under their ids, never as new jobs:
      ``pail.enqueue_many([payloads[i] for i in e.unknown_indices],
      ids=[e.unknown[i] for i in e.unknown_indices])``. An item already there
      counts as enqueued, so no payload is ever enqueued twice.
    """

    def __init__(
        self,
        ids: list[str | None],
        errors: dict[int, BaseException],
        unknown: dict[int, str] | None = None,
    ) -> None:
        self.ids = ids
        self.errors = errors
        self.unknown = dict(unknown or {})
        first = min(errors)
        maybe = f", {len(self.unknown)} of them may have been" if self.unknown else ""
        super().__init__(
            f"{len(errors)} of {len(ids)} jobs were not enqueued{maybe} "
            f"(first: item {first}: {errors[first]!r})"
        )

    @property
    def failed_indices(self) -> list[int]:
        """The items surely not enqueued: re-send them as new jobs."""
        return sorted(set(self.errors) - set(self.unknown))

    @property
    def unknown_indices(self) -> list[int]:
        """The items that may have been enqueued: re-send them under their ids (``unknown``)."""
        return sorted(self.unknown)
