"""Writing dependency graphs: waiting records, fan-in flows, chains, fan-out from a handler.

**The continuation first.** A dependency must name its dependents from
birth (``then``), so a waiting job's record is written *before* any of its
dependencies exists: a dependency that ends finds its dependent's record
there. ``Flow`` is the result of ``Pail.enqueue_flow``: the continuation's
waiting record, then the children's entries, each naming it.

**Fan-out from a handler** (``JobContext.fan_out``) adds the running job
itself to the continuation's dependencies, and its ids are derived from the
job's id (``fan_out_ids``), so a crash anywhere in the handler's writes is
repaired by its next attempt, which makes the very same writes (each
create-only), and a job that dies instead ends its continuation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from pail.codec import MAX_EDGES, META_OUTCOME, OUTCOME_SUCCEEDED, decode_result
from pail.errors import ConfigurationError, DecodeError, PailError
from pail.jsonsafe import check_value
from pail.keys import FLAT, Keys
from pail.protocol.dependencies.record import WaitingJob, check_on_failure
from pail.protocol.dependencies.release import tell, unpinned
from pail.protocol.enqueue import put_pending
from pail.protocol.lease import Lease
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store
from pail.tags import Tags

log = logging.getLogger("pail")


class DependencyError(ConfigurationError):
    """A dependency graph pail cannot keep: no dependencies, too many, or a job waiting for itself."""


@dataclass(frozen=True, slots=True)
class Flow:
    """What ``Pail.enqueue_flow`` (or ``JobContext.fan_out``) enqueued: the children, then one job.

    ``then`` runs once, after every job of ``children`` succeeded; its
    handler reads their results (``current_job().dependencies``).
    """

    children: tuple[str, ...]
    then: str


def check_edges(job_id: str, after: Sequence[str]) -> tuple[str, ...]:
    """``after`` as a tuple of distinct ids, or ``DependencyError``."""
    edges = tuple(dict.fromkeys(after))
    if not edges:
        raise DependencyError("after= names no job: a job must wait for at least one")
    if len(edges) > MAX_EDGES:
        raise DependencyError(f"a job may wait for at most {MAX_EDGES} jobs, got {len(edges)}")
    if job_id in edges:
        raise DependencyError(f"job {job_id} cannot wait for itself")
    return edges


def put_waiting(
    store: Store,
    keys: Keys,
    payload: Any,
    job_id: str,
    after: Sequence[str],
    *,
    now: datetime,
    then: Sequence[str] = (),
    on_failure: str = "dead-letter",
    tags: Tags | None = None,
    trace: dict[str, str] | None = None,
    stats: WriteStats | None = None,
    late: bool = False,
) -> str:
    """Create ``wait/{job_id}`` (create-only): a job that waits for ``after``; its id.

    A 412 is this same record, written by an earlier try (a resend, a
    handler's earlier attempt): the job waits already. Without ``late``,
    each job of ``after`` is enqueued afterwards naming this one in its
    ``then`` (a flow): whoever ends it tells this job at once. With
    ``late`` (``Pail.enqueue(after=...)``: jobs that may exist already and
    name no dependent), the record says so; then each dependency's outcome
    is looked at once (one HEAD each), those already ended are told now, and
    the reaper's pass looks again for the others (``repair``).
    """
    check_value(payload, "payload")
    record = WaitingJob(
        job_id=job_id,
        payload=payload,
        after=check_edges(job_id, after),
        on_failure=check_on_failure(on_failure),
        enqueued_at=now.isoformat(),
        then=tuple(then),
        tags=tags or {},
        trace=trace or {},
    )
    if late:
        record = replace(record, late=record.after)
    written = put_conditional(
        store,
        keys.wait(job_id),
        record.encode(),
        record.write,
        if_none_match=True,
        stats=stats,
        reason="wait",
        read_back=False,
    )
    if written is None:
        log.info("job %s: waiting already (an earlier try wrote it)", job_id)
    if late:
        # After the record, never before: a dependency that ends after this
        # look is seen by the reaper's pass, one that ended before it is seen here.
        for dependency in record.after:
            ended = outcome_of(store, keys, dependency)
            if ended is not None:
                tell(store, keys, dependency, (job_id,), ended, stats=stats)
    return job_id


def outcome_of(store: Store, keys: Keys, job_id: str) -> str | None:
    """The outcome in ``done/{job_id}`` (a HEAD per shard it may live in), None if it has none."""
    for layout in unpinned(keys).layouts(job_id):
        found = store.head(layout.done(job_id))
        if found is not None:
            return found.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
    return None


def enqueue_flow(
    store: Store,
    keys: Keys,
    flow: Flow,
    children: Sequence[Any],
    then: Any,
    *,
    now: datetime,
    on_failure: str = "dead-letter",
    parent: str | None = None,
    stats: WriteStats | None = None,
) -> Flow:
    """Write ``flow``: the continuation's waiting record first, then each child naming it.

    With ``parent`` (a handler's fan-out) the continuation waits for the
    parent job too. A crash part-way leaves a continuation that waits for
    children not yet written: the same writes again (the same ids) finish
    it, each create-only; a parent's next attempt makes them.
    """
    if len(children) != len(flow.children):
        raise ConfigurationError(f"{len(flow.children)} ids for {len(children)} children")
    for child in children:
        check_value(child, "payload")
    after = (*flow.children, parent) if parent is not None else flow.children
    put_waiting(store, keys, then, flow.then, after, now=now, on_failure=on_failure, stats=stats)
    if parent is not None and outcome_of(store, keys, flow.then) is not None:
        # A retry (or a stalled attempt) of a parent whose flow ended already (a child
        # died, or an earlier attempt's lease was dead-lettered): its create-only PUT may
        # have re-created the ended continuation's record, which nothing would end again.
        _drop_ended(store, keys, flow.then)
        return flow
    for payload, job_id in zip(children, flow.children, strict=True):
        put_pending(store, keys, payload, job_id, now=now, then=(flow.then,), stats=stats)
    return flow


def _drop_ended(store: Store, keys: Keys, job_id: str) -> None:
    """Delete the waiting record of ``job_id``, which has an outcome (``If-Match``).

    Only a record that names no dependent of its own (a fan-out's
    continuation never does): there is nobody it still has to tell. The
    outcome's writer deletes the record too, after its outcome: whichever
    DELETE comes second finds it gone, which both take for done.
    """
    for layout in unpinned(keys).layouts(job_id):
        found = store.get(layout.wait(job_id))
        if found is None:
            continue
        try:
            record = WaitingJob.decode(found.body, job_id)
        except DecodeError as exc:
            log.warning("fan-out: wait/%s is not a waiting job; left alone: %s", job_id, exc)
            return
        if not record.then:
            log.info("fan-out: job %s ended already; its re-created record is removed", job_id)
            delete_if_unchanged(store, layout.wait(job_id), found.etag)
        return


def enqueue_chain(
    store: Store,
    keys: Keys,
    payloads: Sequence[Any],
    ids: Sequence[str],
    *,
    now: datetime,
    stats: WriteStats | None = None,
) -> list[str]:
    """A chain ``ids[0] -> ids[1] -> ...``: written from the last job back to the first.

    Every job but the first waits for the one before it; so each waiting
    record exists before the job it waits for does.
    """
    if len(payloads) != len(ids):
        raise ConfigurationError(f"{len(ids)} ids for {len(payloads)} payloads")
    for payload in payloads:
        check_value(payload, "payload")
    for index in range(len(ids) - 1, 0, -1):
        then = (ids[index + 1],) if index + 1 < len(ids) else ()
        put_waiting(
            store,
            keys,
            payloads[index],
            ids[index],
            (ids[index - 1],),
            now=now,
            then=then,
            stats=stats,
        )
    if ids:
        then = (ids[1],) if len(ids) > 1 else ()
        put_pending(store, keys, payloads[0], ids[0], now=now, then=then, stats=stats)
    return list(ids)


def fan_out(
    store: Store,
    keys: Keys,
    lease: Lease,
    flow: Flow,
    children: Sequence[Any],
    then: Any,
    *,
    now: datetime,
    on_failure: str = "dead-letter",
    stats: WriteStats | None = None,
) -> Flow:
    """A running job's fan-out: its lease names the continuation, then ``enqueue_flow``.

    A continuation that has an outcome already (its flow ended: a child
    died, or an earlier attempt of this job was dead-lettered) is not
    written again: one HEAD of ``done/{then}`` after the waiting record's
    PUT, and a record that PUT re-created is deleted; no child is written.

    The lease is rewritten first (fenced, ``If-Match``; a lost lease raises
    ``LeaseLostError`` and nothing else is written), so the job's end,
    whoever writes it, tells the continuation. If the job ended meanwhile
    (we stalled past the lease, and it was dead-lettered), its end may have
    looked before the continuation existed: a last HEAD of ``done/{parent}``
    tells the continuation ourselves.
    """
    parent = lease.job_id
    if flow.then not in lease.record.then:
        lease.renew(then=(*lease.record.then, flow.then))
    enqueue_flow(
        store,
        keys,
        flow,
        children,
        then,
        now=now,
        on_failure=on_failure,
        parent=parent,
        stats=stats,
    )
    ended = store.head(lease.keys.done(parent))
    if ended is not None:
        tell(
            store,
            keys,
            parent,
            (flow.then,),
            ended.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED),
            stats=stats,
        )
    return flow


def flow_keys(keys: Keys, parent: str) -> Keys:
    """The keys a running job's fan-out writes under, the same on every attempt of the job.

    ``keys`` are pinned to the shard the parent lives in. A child's shard is
    a function of its id and the shard count, and a worker's own count may
    change between two attempts of the parent (a rollout grows it): under
    the worker's count, one attempt wrote a child in one shard and its retry
    the same child in another, a second job run after the first had ended
    (sharded sweep seed 106). So the flow is written under the smallest
    count under which the parent has the shard it lives in, a function of
    the parent alone (its own count or a smaller one: every reader of the
    queue's count looks there too); a flat parent's flow is flat.

    >>> job = "01J0000000000000000000000A"
    >>> flow_keys(Keys(shards=4).layouts(job)[0], job).shards, flow_keys(Keys(shards=4).pinned(FLAT), job).shards
    (4, 1)
    """
    base = unpinned(keys)
    if keys.pin is None or not base.sharded:
        return base
    if keys.pin == FLAT:
        return replace(base, shards=1)
    width = 2
    while width <= base.shards:
        sized = replace(base, shards=width)
        if sized.layouts(parent)[0].pin == keys.pin:
            return sized
        width *= 2
    return base


def fan_out_ids(parent: str, number: int, children: int, life: int = 0) -> Flow:
    """The ids of a handler's ``number``-th fan-out of ``children`` jobs: the same on every attempt.

    The same on every attempt of one life of the job, and others in each
    life a redrive begins (``life``: the lease's ``redriven``): the first
    life's flow ended with its death (its continuation failed or was
    cancelled), so a redriven parent fans out a flow of its own rather than
    re-create the waiting record of a continuation that already ended.

    >>> fan_out_ids("01J0000000000000000000000A", 0, 2)
    Flow(children=('01J0000000000000000000000A.0.0', '01J0000000000000000000000A.0.1'), then='01J0000000000000000000000A.0.then')
    >>> fan_out_ids("01J0000000000000000000000A", 0, 1, life=1).then
    '01J0000000000000000000000A.r1.0.then'
    """
    prefix = f"{parent}.{number}" if life == 0 else f"{parent}.r{life}.{number}"
    return Flow(tuple(f"{prefix}.{index}" for index in range(children)), f"{prefix}.then")


def results(store: Store, keys: Keys, ids: Sequence[str]) -> dict[str, Any]:
    """The result of each job of ``ids`` (None for one with no readable result), in order.

    One GET per job (``done/{id}``, in the shard it lives in). Results are
    immutable, so a continuation reads its dependencies' results any time.
    """
    found: dict[str, Any] = {}
    for job_id in ids:
        found[job_id] = _result(store, keys, job_id)
    return found


def _result(store: Store, keys: Keys, job_id: str) -> Any:
    for layout in keys.layouts(job_id):
        try:
            stored = store.get(layout.done(job_id))
        except PailError as exc:
            log.warning("dependencies: the result of %s could not be read: %s", job_id, exc)
            return None
        if stored is None:
            continue
        try:
            return decode_result(stored.body)
        except DecodeError as exc:
            log.warning("dependencies: the result of %s is not JSON: %s", job_id, exc)
            return None
    return None


def as_mapping(found: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only view of ``found`` (what ``current_job().dependencies`` hands a handler)."""
    return MappingProxyType(dict(found))
