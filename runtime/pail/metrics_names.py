"""The names of the CloudWatch metrics pail emits, defined once.

The reaper and the workers emit these as CloudWatch embedded metric format
(EMF) records; the CDK construct builds its alarms on the same names, so the
two cannot drift.

Every metric carries one dimension, ``queue``, whose value is the queue's
namespace, or ``_default`` for the queue without one: a value no namespace can
take (a namespace starts with a letter or digit), so a queue namespaced
``default`` never shares its metrics and alarms with the bucket's queue
without a namespace.
"""

from __future__ import annotations

NAMESPACE = "Pail"
"""The CloudWatch metric namespace of every pail metric."""

DIMENSION_QUEUE = "queue"
"""The one dimension of every pail metric: which queue it is about."""

DEFAULT_QUEUE_DIMENSION = "_default"
"""The ``queue`` dimension value of the queue that has no namespace (no namespace can be it)."""

# Gauges the reaper emits on every run.
PENDING_JOBS = "PendingJobs"
RUNNING_JOBS = "RunningJobs"
DEAD_LETTERED_JOBS = "DeadLetteredJobs"
OLDEST_PENDING_AGE_SECONDS = "OldestPendingAgeSeconds"
# Leases renewed within the visibility timeout: jobs a worker is running now. RunningJobs
# also counts leases nobody renews (a job waiting out a retry backoff, a dead worker's),
# so scaling a Fargate service in waits on this one.
LIVE_LEASES = "LiveLeases"
# What the reaper did on a run: leases it found expired (a worker crashed or
# stalled), and worker invocations it made because jobs waited unclaimed.
EXPIRED_LEASES = "ExpiredLeases"
SELF_HEAL_INVOCATIONS = "SelfHealInvocations"

# Counters and timings the workers emit.
JOBS_PROCESSED = "JobsProcessed"
JOBS_FAILED = "JobsFailed"
JOBS_RETRIED = "JobsRetried"
JOBS_DEAD_LETTERED = "JobsDeadLettered"
JOB_DURATION = "JobDuration"
# Jobs a worker gave back unfinished because it had to stop (a Lambda near its
# timeout, a SIGTERM); each is also counted in JobsFailed.
JOBS_RELEASED = "JobsReleased"
# Jobs a worker claimed too late to start (its claim ended inside the safety
# margin) and handed back untouched: not processed, no attempt spent.
JOBS_RETURNED = "JobsReturned"

REAPER_METRICS: tuple[str, ...] = (
    PENDING_JOBS,
    RUNNING_JOBS,
    DEAD_LETTERED_JOBS,
    OLDEST_PENDING_AGE_SECONDS,
    LIVE_LEASES,
    EXPIRED_LEASES,
    SELF_HEAL_INVOCATIONS,
)
WORKER_METRICS: tuple[str, ...] = (
    JOBS_PROCESSED,
    JOBS_FAILED,
    JOBS_RETRIED,
    JOBS_DEAD_LETTERED,
    JOB_DURATION,
    JOBS_RELEASED,
    JOBS_RETURNED,
)


def queue_dimension(namespace: str) -> str:
    """The ``queue`` dimension value for a queue namespace.

    >>> queue_dimension("reports"), queue_dimension(""), queue_dimension("default")
    ('reports', '_default', 'default')
    """
    return namespace or DEFAULT_QUEUE_DIMENSION
