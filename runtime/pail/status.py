"""A job's status, read straight from the bucket."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pail.codec import (
    META_ATTEMPT,
    META_OUTCOME,
    META_TAGS,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    OUTCOME_SUCCEEDED,
    RETRYING,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    check_carried,
)
from pail.errors import DecodeError, PayloadError
from pail.ids import ulid_time
from pail.keys import QUEUE, Keys
from pail.protocol import delay
from pail.protocol.dependencies import WaitingJob
from pail.protocol.redrive import stale_marker
from pail.store.base import ObjectInfo, Store
from pail.tags import Tags, decode_metadata

# A job moves queue -> run -> done (or back to queue) by writing the next key
# before deleting the previous one. Reading done first (it wins), then queue,
# then run can miss a job that moved on between two reads (a claim, then a
# completion, just behind us): hence a couple of rounds.
_ROUNDS = 3


class JobState(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    WAITING = "waiting"
    """Waiting for its dependencies to succeed (``pail.protocol.dependencies``)."""
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What ``Pail.status`` reports about one job.

    ``attempts`` is the number of attempts started so far; the job does not
    record how many it may have (that is the workers' ``max_retries``).
    ``error`` is the last failed attempt's error (for a pending or running
    job that was retried) or the error that dead-lettered it (for a failed
    job). For a running job, ``holder`` is the worker that holds its lease
    (``host:pid``) and ``updated_at`` the lease's last renewal. ``tags`` are
    the producer's (``enqueue(..., tags=...)``); a cancelled job shows none.
    """

    id: str
    state: JobState
    attempts: int
    enqueued_at: datetime | None
    updated_at: datetime | None
    error: ErrorInfo | None = None
    progress: Any = None
    holder: str | None = None
    tags: Tags = field(default_factory=dict)
    waiting_for: tuple[str, ...] = ()
    """For a waiting job: the dependencies not yet known to have succeeded."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state.value,
            "attempts": self.attempts,
            "enqueued_at": self.enqueued_at.isoformat() if self.enqueued_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "error": self.error.to_json() if self.error else None,
            "progress": self.progress,
            "holder": self.holder,
            "tags": self.tags,
        }


def _enqueued_at(job_id: str, text: str | None) -> datetime | None:
    if text:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    return ulid_time(job_id)


def pending_error(envelope: Envelope) -> ErrorInfo | None:
    """What a pending job's status shows as its error: why it cannot run, else its last error."""
    try:
        check_carried(envelope.payload)
    except PayloadError as exc:
        return ErrorInfo.from_exception(exc)  # the next claim quarantines it
    return envelope.last_error


def _count(text: str | None) -> int:
    """An attempt count from object metadata; 0 when absent or not a count (another writer's)."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 15:
        return 0
    return int(text)


def read_status(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    """The job's status, or None if no object of it exists (never enqueued, or expired).

    In a sharded queue, each shard the job may live in (``Keys.layouts``),
    most likely first: a job stays in the shard it was enqueued in.
    """
    for layout in keys.layouts(job_id):
        for _ in range(_ROUNDS):
            found = _read_once(store, layout, job_id)
            if found is not None:
                return found
    return None  # not a job in any of its states; waiting (``read_waiting_status``) is the last


def find_object(store: Store, keys: Keys, job_id: str, state: str) -> ObjectInfo | None:
    """``job_id``'s object under ``state`` (a HEAD per shard it may live in), or None.

    >>> from pail import Pail, MemoryStore
    >>> from pail.keys import QUEUE
    >>> queue = Pail(MemoryStore("jobs"), shards=4)
    >>> find_object(queue.store, queue.keys, queue.enqueue({}), QUEUE).key.startswith("queue/")
    True
    """
    for layout in keys.layouts(job_id):
        found = store.head(f"{layout.job_prefix(state, job_id)}{job_id}")
        if found is not None:
            return found
    return None


def locate(store: Store, keys: Keys, job_id: str) -> Keys:
    """The pinned keys of the shard ``job_id`` lives in; its shard under the current count if none.

    No request for a queue of one shard, nor for a job of the current
    count's shard that is done (the usual case). ``Keys.layouts`` has the order.
    """
    layouts = keys.layouts(job_id)
    if len(layouts) == 1:
        return layouts[0]
    for layout in layouts:
        if any(
            store.head(key) is not None
            for key in (
                layout.done(job_id),
                layout.queue(job_id),
                layout.run(job_id),
                layout.dlq(job_id),
            )
        ):
            return layout
    found = delay.find(store, keys, job_id)
    return keys.of_key(found.key, QUEUE) if found is not None else layouts[0]


def _read_once(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    # done/{id} first: it is the single terminal key, and an outcome stands over
    # whatever a late writer left beside it (a stalled owner's retry entry, a
    # lease the reaper has not dropped yet).
    done = store.head(keys.done(job_id))
    outcome = None if done is None else done.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
    if done is not None and outcome == OUTCOME_CANCELLED:
        return JobStatus(job_id, JobState.CANCELLED, 0, ulid_time(job_id), done.last_modified)
    if done is not None and outcome != OUTCOME_DEAD:
        attempts = _count(done.metadata.get(META_ATTEMPT))
        tags = decode_metadata(done.metadata.get(META_TAGS))
        return JobStatus(
            job_id, JobState.DONE, attempts, ulid_time(job_id), done.last_modified, tags=tags
        )
    pending = store.get(keys.queue(job_id))
    if pending is not None:
        found = _pending(job_id, pending.body, pending.last_modified, done)
        if found is not None:
            return found
    running = store.get(keys.run(job_id))
    if running is not None:
        found = _running(job_id, running.body, running.last_modified, done)
        if found is not None:
            return found
    dead = store.get(keys.dlq(job_id))
    if dead is not None:
        try:
            letter = DeadLetter.decode(dead.body, job_id)
        except DecodeError as exc:
            return JobStatus(
                job_id,
                JobState.FAILED,
                0,
                ulid_time(job_id),
                dead.last_modified,
                ErrorInfo.from_exception(exc),
            )
        return JobStatus(
            job_id,
            JobState.FAILED,
            letter.attempts,
            _enqueued_at(job_id, letter.enqueued_at),
            dead.last_modified,
            letter.error,
            tags=letter.tags,
        )
    if done is not None:  # a dead marker whose dlq/ record is not written yet, or expired
        return JobStatus(job_id, JobState.FAILED, 0, ulid_time(job_id), done.last_modified)
    return None


def read_waiting_status(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    """The status of a job waiting for its dependencies, or None (a GET per shard it may live in)."""
    for layout in keys.layouts(job_id):
        waiting = store.get(layout.wait(job_id))
        if waiting is not None:
            return _waiting(job_id, waiting.body, waiting.last_modified)
    return None


def _waiting(job_id: str, body: bytes, modified: datetime) -> JobStatus:
    """A waiting job's status; foreign bytes in its place read as waiting, with the reason."""
    try:
        record = WaitingJob.decode(body, job_id)
    except DecodeError as exc:
        error = ErrorInfo.from_exception(exc)
        return JobStatus(job_id, JobState.WAITING, 0, ulid_time(job_id), modified, error)
    return JobStatus(
        job_id,
        JobState.WAITING,
        0,
        _enqueued_at(job_id, record.enqueued_at),
        modified,
        tags=record.tags,
        waiting_for=tuple(job for job in record.after if job not in record.met),
    )


def _pending(
    job_id: str, body: bytes, modified: datetime, dead: ObjectInfo | None
) -> JobStatus | None:
    """A pending entry's status; None for a stale entry beside the dead marker ``dead``.

    Beside a dead marker, only an entry of a later life is pending: its
    redrive took the death back and has not removed the marker yet (or a
    late write re-created it).
    """
    try:
        envelope = Envelope.decode(body)
    except DecodeError as exc:
        if dead is not None:
            return None
        return JobStatus(
            job_id, JobState.PENDING, 0, ulid_time(job_id), modified, ErrorInfo.from_exception(exc)
        )
    if dead is not None and not stale_marker(dead, envelope.redriven):
        return None
    return JobStatus(
        job_id,
        JobState.CANCELLED if envelope.cancelled else JobState.PENDING,
        envelope.attempts,
        _enqueued_at(job_id, envelope.enqueued_at),
        modified,
        pending_error(envelope),
        tags=envelope.tags,
    )


def _running(
    job_id: str, body: bytes, modified: datetime, dead: ObjectInfo | None
) -> JobStatus | None:
    """A lease's status; None for a lease beside a dead marker it does not name (dying)."""
    try:
        record = LeaseRecord.decode(body, job_id)
    except DecodeError as exc:
        if dead is not None:
            return None
        # Foreign bytes under run/: the reaper quarantines them once they expire.
        error = ErrorInfo.from_exception(exc)
        return JobStatus(job_id, JobState.RUNNING, 0, ulid_time(job_id), modified, error)
    if dead is not None and not stale_marker(dead, record.redriven):
        return None  # the dead-letter is being written
    return JobStatus(
        job_id,
        # A retrying lease is an attempt that failed: the job waits for its retry.
        JobState.PENDING if record.state == RETRYING else JobState.RUNNING,
        record.attempts_used if record.state == RETRYING else record.attempt,
        _enqueued_at(job_id, record.enqueued_at),
        modified,
        record.error,
        record.progress,
        None if record.state == RETRYING else record.owner,
        record.tags,
    )


def read_delayed_status(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    """The status of a delayed job that is not due yet (pending), or None if there is none."""
    info = delay.find(store, keys, job_id)
    entry = store.get(info.key) if info is not None else None
    if entry is None:
        return None
    try:
        envelope = Envelope.decode(entry.body)
    except DecodeError as exc:
        # Foreign bytes: a claim quarantines them once they are due.
        error = ErrorInfo.from_exception(exc)
        return JobStatus(job_id, JobState.PENDING, 0, None, entry.last_modified, error)
    # Decoding checked that enqueued_at is an ISO 8601 time.
    enqueued = datetime.fromisoformat(envelope.enqueued_at) if envelope.enqueued_at else None
    return JobStatus(
        job_id,
        JobState.CANCELLED if envelope.cancelled else JobState.PENDING,
        envelope.attempts,
        enqueued,
        entry.last_modified,
        pending_error(envelope),
        tags=envelope.tags,
    )
