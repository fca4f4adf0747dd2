"""Telling the jobs that wait for a dependency how it ended; promotion and failure.

Every writer that ends a job (its ``complete``, a dead-letter, a cancel, the
reaper finishing any of them) calls ``tell`` with the job's dependents
(``then``, carried by its records) **before** it removes the job's last
record: so a crash before ``tell`` returned leaves that record, and the
path that repairs it (the reaper for a lease, a claim for a cancelled
entry) tells again. Every step is idempotent.

For one dependent ``D`` of dependency ``A`` (``docs/protocol.md``,
"Dependencies"):

1. GET ``wait/{D}``: none means D is not waiting (promoted or ended already).
2. ``A`` succeeded: PUT ``wait/{D}`` ``If-Match`` with ``A`` added to ``met``
   (412: another dependency's writer got there first, read again). Once
   ``met`` covers ``after``: PUT ``queue/{D}`` create-only (the promotion: a
   412 means it is pending already), then DELETE ``wait/{D}`` ``If-Match``.
3. ``A`` was cancelled, or dead-lettered (and D's ``on_failure`` is not
   ``wait``): D's outcome (``done/{D}`` create-only, and for a dead-letter
   the ``dlq/{D}`` record whose error names ``A``), then D's own dependents
   are told (a chain), then DELETE ``wait/{D}`` ``If-Match``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from pail.codec import (
    META_OUTCOME,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    DeadLetter,
    ErrorInfo,
    marker_body,
)
from pail.errors import DecodeError, PailError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol import layout as layout_marker
from pail.protocol import outcome as outcome_writer
from pail.protocol.dependencies.record import CANCEL, WAIT, WaitingJob
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import Store, StoredObject

log = logging.getLogger("pail")

ROUNDS = 64
"""Reads of one waiting record before ``tell`` gives up (and leaves the dependency's record
for its repair): each lost round is another dependency's writer that got there first."""

DEPENDENCY_FAILED = "DependencyFailed"
"""The error type of a job dead-lettered because a dependency was."""


def unpinned(keys: Keys) -> Keys:
    """The queue's keys, not bound to one shard: a dependent may live in another shard."""
    return replace(keys, pin=None)


def find(store: Store, keys: Keys, job_id: str) -> tuple[Keys, StoredObject] | None:
    """``job_id``'s waiting record and the pinned keys of its shard, or None (a GET per layout).

    Not under this process's count, the queue may have grown past it (a
    rollout in progress: producers already write under the new count). An
    answer of "not waiting" drops the edge for good, so before giving it the
    layout marker is read (1 GET, only in this rare case) and the layouts of
    a larger count it names are tried too.
    """
    tried: set[str] = set()
    for layout in unpinned(keys).layouts(job_id):
        tried.add(layout.wait(job_id))
        found = store.get(layout.wait(job_id))
        if found is not None:
            return layout, found
    marker = layout_marker.read(store, keys)
    if marker is None or marker.shards is None or marker.shards <= keys.shards:
        return None
    for layout in replace(unpinned(keys), shards=marker.shards).layouts(job_id):
        if layout.wait(job_id) not in tried:
            found = store.get(layout.wait(job_id))
            if found is not None:
                return layout, found
    return None


def tell(
    store: Store,
    keys: Keys,
    dependency: str,
    dependents: Sequence[str],
    outcome: str,
    *,
    stats: WriteStats | None = None,
) -> bool:
    """Tell each of ``dependents`` that ``dependency`` ended with ``outcome``; True once all heard.

    False if a dependent's record kept changing under us (``ROUNDS`` lost
    races): the caller then keeps the dependency's record, whose repair
    tells again. Storage errors are raised: the caller keeps its record too.
    """
    heard = True
    for dependent in dependents:
        heard = _tell_one(store, keys, dependency, dependent, outcome, stats) and heard
    return heard


def told(
    store: Store,
    keys: Keys,
    dependency: str,
    dependents: Sequence[str],
    outcome: str,
    *,
    stats: WriteStats | None = None,
) -> bool:
    """``tell``, with a storage error logged and answered False: never raised into a settle.

    The caller keeps the dependency's record on False, so its repair tells again.
    """
    try:
        return tell(store, keys, dependency, dependents, outcome, stats=stats)
    except PailError as exc:
        log.warning(
            "dependencies: job %s could not tell its dependents (%s); left for repair",
            dependency,
            exc,
        )
        return False


def _tell_one(
    store: Store,
    keys: Keys,
    dependency: str,
    dependent: str,
    outcome: str,
    stats: WriteStats | None,
) -> bool:
    for _ in range(ROUNDS):
        found = find(store, keys, dependent)
        if found is None:
            return True  # not waiting: promoted, ended, or never written
        layout, current = found
        try:
            record = WaitingJob.decode(current.body, dependent)
        except DecodeError as exc:
            log.warning(
                "dependencies: %s is not a waiting job pail can act on; left alone: %s",
                current.key,
                exc,
            )
            return True
        if dependency not in record.after:
            log.warning(
                "dependencies: job %s names %s as a dependent, but it does not wait for it",
                dependency,
                dependent,
            )
            return True
        if outcome == OUTCOME_SUCCEEDED:
            etag = current.etag
            if dependency not in record.met:
                record = record.meeting(dependency)
                won = put_conditional(
                    store,
                    current.key,
                    record.encode(),
                    record.write,
                    if_match=current.etag,
                    stats=stats,
                    reason="dependency-met",
                )
                if won is None:
                    continue  # another dependency's writer changed it: read again
                etag = won.etag
            if record.ready:
                promote(store, layout, record, etag, stats=stats)
            return True
        if outcome == OUTCOME_DEAD and record.on_failure == WAIT:
            return True  # it waits for a redrive of the dependency to succeed
        return end(store, layout, record, current.etag, outcome, dependency, stats=stats)
    log.warning("dependencies: job %s could not tell %s; left for repair", dependency, dependent)
    return False


def promote(
    store: Store, keys: Keys, record: WaitingJob, etag: str, *, stats: WriteStats | None = None
) -> None:
    """Make the ready job ``record`` pending: its entry create-only, then its waiting record goes.

    A crash between the two leaves both: the repair of the last dependency's
    record tells again, and this runs again (the entry's PUT fails: pending
    already; or, if the job was claimed meanwhile, a re-created entry that
    its claims drop, as for a repeated promotion of a delayed job).
    """
    envelope = record.envelope()
    put_conditional(
        store,
        keys.queue(record.job_id),
        envelope.encode(),
        envelope.write,
        if_none_match=True,
        stats=stats,
        reason="promote",
        read_back=False,
    )
    _remove(store, keys.wait(record.job_id), etag)
    log.info("job %s: its dependencies succeeded; pending now", record.job_id)


def end(
    store: Store,
    keys: Keys,
    record: WaitingJob,
    etag: str,
    outcome: str,
    because: str | None,
    *,
    stats: WriteStats | None = None,
) -> bool:
    """End the waiting job ``record``: cancelled, or dead-lettered naming ``because``.

    ``outcome`` is the dependency's (``because`` None: an operator's cancel).
    The order is the one of every end: the outcome, then the job's own
    dependents are told, then its waiting record goes. True once done.
    """
    job_id = record.job_id
    dead = outcome == OUTCOME_DEAD and record.on_failure != CANCEL
    ended = OUTCOME_DEAD if dead else OUTCOME_CANCELLED
    token = new_token()
    made = outcome_writer.create(
        store,
        keys,
        job_id,
        marker_body(token),
        token,
        metadata=outcome_writer.metadata(ended),
        life=0,
        stats=stats,
        reason="dependency-ended",
    )
    if made.written is None and made.existing is not None:
        ended = made.existing.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
    if dead and ended == OUTCOME_DEAD:
        error = ErrorInfo(
            DEPENDENCY_FAILED,
            f"job {because} was dead-lettered, so job {job_id} never ran",
        )
        letter = DeadLetter(
            job_id=job_id,
            payload=record.payload,
            attempts=0,
            error=error,
            enqueued_at=record.enqueued_at,
            tags=record.tags,
            trace=record.trace,
            after=record.after,
            then=record.then,
        )
        put_conditional(
            store,
            keys.dlq(job_id),
            letter.encode(),
            letter.write,
            if_none_match=True,
            stats=stats,
            reason="dlq",
        )
    if record.then and not tell(store, keys, job_id, record.then, ended, stats=stats):
        return False
    _remove(store, keys.wait(job_id), etag)
    why = f"job {because} ended {outcome}" if because else "cancelled"
    log.info("job %s: waiting job ended (%s): %s", job_id, ended, why)
    return True


def _remove(store: Store, key: str, etag: str) -> None:
    """Delete the waiting record of a job that is pending or ended now, whatever was added to it.

    ``If-Match`` the ETag read; another dependency's writer may have added
    to ``met`` since (the simulation found that: a dead-letter's delete
    failed on a concurrent success's write and left the record forever), so
    a changed record is read again and deleted under its new ETag. Its job
    has moved on: nothing written to it any more counts.
    """
    for _ in range(ROUNDS):
        if delete_if_unchanged(store, key, etag):
            return
        current = store.head(key)
        if current is None:
            return
        etag = current.etag
    log.warning("dependencies: %s kept changing; left for the reaper's pass", key)
