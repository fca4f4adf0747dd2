"""A job's status, read straight from the bucket."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pail.codec import (
    META_OUTCOME,
    OUTCOME_CANCELLED,
    OUTCOME_DEAD,
    RETRYING,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
)
from pail.errors import DecodeError
from pail.ids import ulid_time
from pail.keys import Keys
from pail.store.base import Store

# A job moves queue -> run -> done (or back to queue) by writing the next key
# before deleting the previous one, so reading queue, run, done in that order
# always finds it, except when a retry writes queue/ just after we looked
# there: hence a couple of rounds.
_ROUNDS = 3


class JobState(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What ``Pail.status`` reports about one job.

    ``attempts`` is the number of attempts started so far. ``error`` is the
    last failed attempt's error (for a pending or running job that was
    retried) or the error that dead-lettered it (for a failed job).
    """

    id: str
    state: JobState
    attempts: int
    enqueued_at: datetime | None
    updated_at: datetime | None
    error: ErrorInfo | None = None
    progress: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state.value,
            "attempts": self.attempts,
            "enqueued_at": self.enqueued_at.isoformat() if self.enqueued_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "error": self.error.to_json() if self.error else None,
            "progress": self.progress,
        }


def _enqueued_at(job_id: str, text: str | None) -> datetime | None:
    if text:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    return ulid_time(job_id)


def read_status(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    """The job's status, or None if no object of it exists (never enqueued, or expired)."""
    for _ in range(_ROUNDS):
        found = _read_once(store, keys, job_id)
        if found is not None:
            return found
    return None


def _read_once(store: Store, keys: Keys, job_id: str) -> JobStatus | None:
    pending = store.get(keys.queue(job_id))
    if pending is not None:
        try:
            envelope = Envelope.decode(pending.body)
        except DecodeError as exc:
            return JobStatus(
                job_id,
                JobState.PENDING,
                0,
                ulid_time(job_id),
                pending.last_modified,
                ErrorInfo.from_exception(exc),
            )
        return JobStatus(
            job_id,
            JobState.CANCELLED if envelope.cancelled else JobState.PENDING,
            envelope.attempts,
            _enqueued_at(job_id, envelope.enqueued_at),
            pending.last_modified,
            envelope.last_error,
        )
    running = store.get(keys.run(job_id))
    if running is not None:
        try:
            record = LeaseRecord.decode(running.body, job_id)
        except DecodeError:
            return JobStatus(job_id, JobState.RUNNING, 0, ulid_time(job_id), running.last_modified)
        return JobStatus(
            job_id,
            # A retrying lease is an attempt that failed: the job waits for its retry.
            JobState.PENDING if record.state == RETRYING else JobState.RUNNING,
            record.attempts_used if record.state == RETRYING else record.attempt,
            _enqueued_at(job_id, record.enqueued_at),
            running.last_modified,
            record.error,
            record.progress,
        )
    done = store.head(keys.done(job_id))
    if done is not None and done.metadata.get(META_OUTCOME) == OUTCOME_CANCELLED:
        return JobStatus(job_id, JobState.CANCELLED, 0, ulid_time(job_id), done.last_modified)
    if done is not None and done.metadata.get(META_OUTCOME) != OUTCOME_DEAD:
        attempts = int(done.metadata.get("pail-attempt", "0") or 0)
        return JobStatus(job_id, JobState.DONE, attempts, ulid_time(job_id), done.last_modified)
    dead = store.get(keys.dlq(job_id))
    if dead is not None:
        try:
            letter = DeadLetter.decode(dead.body, job_id)
        except DecodeError:
            return JobStatus(job_id, JobState.FAILED, 0, ulid_time(job_id), dead.last_modified)
        return JobStatus(
            job_id,
            JobState.FAILED,
            letter.attempts,
            _enqueued_at(job_id, letter.enqueued_at),
            dead.last_modified,
            letter.error,
        )
    if done is not None:  # a dead marker whose dlq/ record is not written yet, or expired
        return JobStatus(job_id, JobState.FAILED, 0, ulid_time(job_id), done.last_modified)
    return None
