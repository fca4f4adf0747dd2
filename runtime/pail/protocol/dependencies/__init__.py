"""Job dependencies: chains and fan-in, on the bucket alone (``docs/dependencies.md``).

A job enqueued ``after`` others **waits** in ``wait/{id}`` (``record``) until
every one of them has succeeded; then it becomes pending, once. The edges
travel with the dependencies: each dependency names its dependents in its
own records from birth (``then``, in its pending entry, its lease, its dead
letter), so whoever ends a dependency tells its dependents (``release.tell``)
before it removes the dependency's last record, and a crash in between
leaves that record for the path that already repairs it (the reaper, a
claim). A job without dependents carries nothing and pays nothing.

- ``record``: the waiting record, its codec (foreign bytes are a ``DecodeError``).
- ``release``: telling a dependent one dependency's outcome; promotion and failure.
- ``graph``: writing waiting records and flows (fan-in, chains, fan-out from a handler),
  and reading a job's dependencies' results.
"""

from pail.protocol.dependencies.graph import (
    DependencyError,
    Flow,
    as_mapping,
    enqueue_chain,
    enqueue_flow,
    fan_out,
    fan_out_ids,
    flow_keys,
    put_waiting,
    results,
)
from pail.protocol.dependencies.record import (
    CANCEL,
    DEAD_LETTER,
    ON_FAILURE,
    WAIT,
    WaitingJob,
)
from pail.protocol.dependencies.release import end, find, tell, told, unpinned

__all__ = [
    "CANCEL",
    "DEAD_LETTER",
    "ON_FAILURE",
    "WAIT",
    "DependencyError",
    "Flow",
    "WaitingJob",
    "as_mapping",
    "end",
    "enqueue_chain",
    "enqueue_flow",
    "fan_out",
    "fan_out_ids",
    "find",
    "flow_keys",
    "put_waiting",
    "results",
    "tell",
    "told",
    "unpinned",
]
