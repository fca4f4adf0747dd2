"""Object keys: every prefix the protocol uses, defined once.

The runtime, the CDK construct (lifecycle rules, grants) and the tests import
these names, so a prefix is never spelled twice.

A job's state is its key prefix, as in pailq 0.1.1::

    queue/{id}   pending: the job envelope, waiting to be claimed
    run/{id}     running: the lease, held by exactly one worker
    done/{id}    terminal: the handler's result (or ``null`` for a dead job)
    dlq/{id}     dead-lettered: the job, its attempts and the last error

A namespace puts every prefix under ``{namespace}/`` so several queues can
share one bucket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

QUEUE = "queue/"
RUN = "run/"
DONE = "done/"
DLQ = "dlq/"

ALL_PREFIXES: tuple[str, ...] = (QUEUE, RUN, DONE, DLQ)

# Not a job state: dedup key records (``pail.protocol.dedup``), named by a digest.
DEDUP = "keys/"

# Not a job state: pail's own bookkeeping, such as where the reaper's last pass
# stopped (``pail.protocol.reap_cursor``). It starts with "_", which no namespace
# can, so no queue's keys (or grants on them) ever fall under another's.
SYSTEM = "_pail/"
REAP_CURSOR = "reap-cursor"

_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

MAX_ID_LENGTH = 512
"""The longest job id pail reads or accepts (``pail.ids.validate_job_id``)."""


def validate_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is a valid queue name, else raise ``ValueError``.

    >>> validate_namespace("reports")
    'reports'
    """
    if namespace and not _NAMESPACE.match(namespace):
        raise ValueError(
            f"invalid queue namespace {namespace!r}: use 1-63 characters of a-z, 0-9, '-' "
            "and '_', starting with a letter or digit"
        )
    if f"{namespace}/" in (*ALL_PREFIXES, DEDUP):
        # "queue" would put its jobs at queue/queue/{id}, inside the default
        # queue's own listing: the two queues would claim each other's jobs.
        raise ValueError(
            f"invalid queue namespace {namespace!r}: it is the name of a key prefix "
            f"({', '.join(p.rstrip('/') for p in (*ALL_PREFIXES, DEDUP))})"
        )
    return namespace


@dataclass(frozen=True, slots=True)
class Keys:
    """Builds and parses the keys of one queue (one namespace) in a bucket.

    >>> Keys("reports").queue("01J0000000000000000000000A")
    'reports/queue/01J0000000000000000000000A'
    >>> Keys().job_id("done/01J0000000000000000000000A")
    '01J0000000000000000000000A'
    """

    namespace: str = ""

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)

    @property
    def root(self) -> str:
        return f"{self.namespace}/" if self.namespace else ""

    def prefix(self, state: str) -> str:
        return f"{self.root}{state}"

    def queue(self, job_id: str) -> str:
        return f"{self.root}{QUEUE}{job_id}"

    def run(self, job_id: str) -> str:
        return f"{self.root}{RUN}{job_id}"

    def done(self, job_id: str) -> str:
        return f"{self.root}{DONE}{job_id}"

    def dlq(self, job_id: str) -> str:
        return f"{self.root}{DLQ}{job_id}"

    def dedup(self, digest: str) -> str:
        return f"{self.root}{DEDUP}{digest}"

    def reap_cursor(self) -> str:
        """The object that says where the reaper's next pass over ``run/`` starts.

        >>> Keys("reports").reap_cursor()
        'reports/_pail/reap-cursor'
        """
        return f"{self.root}{SYSTEM}{REAP_CURSOR}"

    def entry_id(self, key: str, state: str) -> str | None:
        """The job id of ``key`` under ``state``'s prefix, or None if the key names no job.

        What follows the prefix must be one segment of 1 to ``MAX_ID_LENGTH``
        characters. A zero-byte "folder" that the S3 console makes
        (``queue/``, ``queue/reports/``) and a nested key (``queue/a/b``) name
        no job: pail never writes them, and every reader passes them by.

        >>> keys = Keys()
        >>> keys.entry_id("queue/01J0000000000000000000000A", QUEUE)
        '01J0000000000000000000000A'
        >>> keys.entry_id("queue/", QUEUE) is None, keys.entry_id("queue/a/b", QUEUE) is None
        (True, True)
        """
        prefix = self.prefix(state)
        if not key.startswith(prefix):
            return None
        job_id = key[len(prefix) :]
        if not job_id or "/" in job_id or len(job_id) > MAX_ID_LENGTH:
            return None
        return job_id

    def job_id(self, key: str) -> str:
        """The job id of any key of this queue (the part after the state prefix)."""
        rest = key.removeprefix(self.root)
        for state in ALL_PREFIXES:
            if rest.startswith(state):
                return rest[len(state) :]
        raise ValueError(f"key {key!r} is not a job key of queue {self.namespace!r}")
