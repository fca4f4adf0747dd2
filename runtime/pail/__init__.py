"""pail: a brokerless, durable job queue in one S3 bucket.

>>> from pail import Pail
>>> pail = Pail.connect("my-bucket")            # doctest: +SKIP
>>> job_id = pail.enqueue({"report_id": "q2"})  # doctest: +SKIP
>>> pail.work_once(build_report)                # doctest: +SKIP
>>> pail.result(job_id)                         # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

from pail.clock import Clock, ManualClock, SystemClock
from pail.codec import DeadLetter, ErrorInfo
from pail.drain import HandlerTimeoutError, current_job
from pail.errors import (
    AccessDeniedError,
    BatchEnqueueError,
    BucketNotFoundError,
    ConditionFailedError,
    ConfigurationError,
    ConflictError,
    CredentialsNotFoundError,
    DecodeError,
    EnqueueUnknownError,
    JobNotFoundError,
    LeaseLostError,
    PailError,
    PayloadError,
    StorageError,
)
from pail.message import Message
from pail.protocol.dedup import EnqueueResult
from pail.protocol.retry import RetryPolicy
from pail.protocol.transitions import Ending
from pail.queue import Pail
from pail.stats import Stats
from pail.status import JobState, JobStatus
from pail.store import MemoryStore, S3Store, Store
from pail.store.s3 import Mode

if TYPE_CHECKING:
    from pail.aws.lambda_worker import lambda_worker as lambda_worker
    from pail.protocol.reaper import ReapReport as ReapReport

__version__ = "0.3.0"

__all__ = [
    "AccessDeniedError",
    "BatchEnqueueError",
    "BucketNotFoundError",
    "Clock",
    "ConditionFailedError",
    "ConfigurationError",
    "ConflictError",
    "CredentialsNotFoundError",
    "DeadLetter",
    "DecodeError",
    "Ending",
    "EnqueueResult",
    "EnqueueUnknownError",
    "ErrorInfo",
    "HandlerTimeoutError",
    "JobNotFoundError",
    "JobState",
    "JobStatus",
    "LeaseLostError",
    "ManualClock",
    "MemoryStore",
    "Message",
    "Mode",
    "Pail",
    "PailError",
    "PayloadError",
    "ReapReport",
    "RetryPolicy",
    "S3Store",
    "Stats",
    "StorageError",
    "Store",
    "SystemClock",
    "__version__",
    "current_job",
]


def __getattr__(name: str) -> Any:
    # `pail.lambda_worker` is imported on first use: the Lambda adapter is not
    # part of `import pail`, and stays out of `__all__` for the same reason.
    if name == "lambda_worker":
        from pail.aws.lambda_worker import lambda_worker

        return lambda_worker
    # The reaper's report, on first use too: a worker's cold start needs no reaper.
    if name == "ReapReport":
        from pail.protocol.reaper import ReapReport

        return ReapReport
    raise AttributeError(f"module 'pail' has no attribute {name!r}")
