"""``Pail``: the public face of one queue in one bucket."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pail.clock import Clock, SystemClock
from pail.codec import (
    META_OUTCOME,
    META_WRITE,
    OUTCOME_DEAD,
    DeadLetter,
    Envelope,
    decode_result,
)
from pail.config import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_VISIBILITY_TIMEOUT,
    validate_max_retries,
    validate_visibility_timeout,
)
from pail.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    ConditionFailedError,
    ConfigurationError,
    DecodeError,
    EnqueueUnknownError,
    JobNotFoundError,
    PailError,
    StorageError,
)
from pail.features import batch, cancel, dedup
from pail.features import delay as delay_feature
from pail.features.priority import Priority, due_for
from pail.features.retry import RetryPolicy
from pail.ids import new_job_id, ulid_time, validate_job_id
from pail.keys import DLQ, DONE, QUEUE, RUN, Keys
from pail.message import Message
from pail.operate import dead_letters as dead_letter_ops
from pail.operate import purge as purge_ops
from pail.operate.jobs import JobPage, list_jobs
from pail.operate.objects import JobKind
from pail.operate.queues import QueueList, list_queues
from pail.protocol import redrive
from pail.protocol.claim import Claimer
from pail.protocol.reaper import Reaper, ReapReport
from pail.protocol.settle import Policy
from pail.protocol.writes import WriteStats
from pail.status import JobStatus, read_status
from pail.store.base import Store
from pail.store.s3 import S3Store, is_directory_bucket
from pail.worker import Handler, Polling, run_message

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("pail")

_REFUSED = (BucketNotFoundError, AccessDeniedError, ConfigurationError)
"""Errors that mean the server refused a write: it was not applied."""

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_DIRECTORY_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}--[a-z0-9-]+--x-s3$")


class Mode(StrEnum):
    """Standard (general purpose bucket) or express (S3 Express One Zone directory bucket)."""

    STANDARD = "standard"
    EXPRESS = "express"

    @classmethod
    def for_bucket(cls, bucket: str) -> Mode:
        """Express for names ending in ``--x-s3``, as S3 names directory buckets.

        >>> Mode.for_bucket("jobs"), Mode.for_bucket("jobs--use1-az4--x-s3")
        (<Mode.STANDARD: 'standard'>, <Mode.EXPRESS: 'express'>)
        """
        return cls.EXPRESS if is_directory_bucket(bucket) else cls.STANDARD


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts per state, and the enqueue time of the oldest pending job."""

    pending: int
    running: int
    done: int
    failed: int
    oldest_pending: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": self.pending,
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "oldest_pending": self.oldest_pending.isoformat() if self.oldest_pending else None,
        }


def validate_bucket_name(bucket: str) -> str:
    """Return ``bucket`` if S3 would accept it as a bucket name, else raise ``ConfigurationError``."""
    if not isinstance(bucket, str) or not (
        _DIRECTORY_BUCKET.match(bucket) or (_BUCKET.match(bucket) and ".." not in bucket)
    ):
        raise ConfigurationError(
            f"invalid bucket name {bucket!r}: S3 bucket names are 3-63 characters of a-z, 0-9, "
            "'.' and '-', starting and ending with a letter or digit"
        )
    return bucket


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Pail:
    """A durable job queue in one S3 bucket.

    >>> from pail.store import MemoryStore
    >>> pail = Pail(MemoryStore("jobs"))
    >>> job_id = pail.enqueue({"report_id": "q2_revenue"})
    >>> pail.work_once(lambda payload: {"url": f"reports/{payload['report_id']}.pdf"})
    True
    >>> pail.result(job_id)
    {'url': 'reports/q2_revenue.pdf'}
    """

    def __init__(
        self,
        store: Store,
        *,
        queue: str = "",
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        max_retries: int | None = DEFAULT_MAX_RETRIES,
        clock: Clock | None = None,
        owner: str | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        try:
            self._keys = Keys(queue)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._store = store
        self._policy = Policy(
            validate_max_retries(max_retries),
            validate_visibility_timeout(visibility_timeout),
            retry_policy,
        )
        self._clock = clock or SystemClock()
        self._owner = owner or _owner()
        self._local = threading.local()
        self._reaper: Reaper | None = None
        self.write_stats = WriteStats()

    @classmethod
    def connect(
        cls,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        region: str | None = None,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        max_retries: int | None = DEFAULT_MAX_RETRIES,
        queue: str = "",
        session_token: str | None = None,
        profile: str | None = None,
        client: S3Client | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> Pail:
        """Connect to the queue in ``bucket``. Only this method builds a boto3 client.

        Credentials and region follow boto3's usual chain unless given.
        ``queue`` names a namespace, so several queues can share a bucket.
        ``retry_policy`` sets a backoff between attempts (default: none).
        """
        validate_bucket_name(bucket)
        if client is None:
            client = build_client(
                endpoint_url=endpoint_url,
                access_key_id=access_key_id,
                secret_access_key=secret_access_key,
                session_token=session_token,
                region=region,
                profile=profile,
            )
        return cls(
            S3Store(client, bucket),
            queue=queue,
            visibility_timeout=visibility_timeout,
            max_retries=max_retries,
            retry_policy=retry_policy,
        )

    # -- properties ---------------------------------------------------------

    @property
    def bucket(self) -> str:
        return self._store.bucket

    @property
    def store(self) -> Store:
        return self._store

    @property
    def keys(self) -> Keys:
        return self._keys

    @property
    def mode(self) -> Mode:
        return Mode.for_bucket(self._store.bucket)

    @property
    def visibility_timeout(self) -> float:
        return self._policy.visibility_timeout

    @property
    def max_retries(self) -> int | None:
        return self._policy.max_retries

    # -- producing ----------------------------------------------------------

    def enqueue(
        self,
        payload: Any,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        priority: str = Priority.NORMAL,
    ) -> str:
        """Add a job; return its id (a 26-character ULID).

        The payload must be JSON-serialisable; if it is not, ``PayloadError``
        is raised and nothing is written. With a dedup ``key``, at most one
        job per key is enqueued and a repeat returns the first job's id (use
        ``enqueue_once`` to learn whether this call created it). With
        ``delay`` (seconds or a ``timedelta``) or ``not_before`` (an aware
        ``datetime``) the job is not claimable before that time. A ``"high"``
        ``priority`` job is claimed before the normal backlog.
        """
        now = delay_feature.utc_now()
        due = due_for(priority, delay_feature.due_time(delay, not_before, now=now))
        if key is not None:
            return self.enqueue_once(payload, key=key, due=due).id
        return self._put_pending(payload, new_job_id(), due=due, now=now)

    def _put_pending(
        self, payload: Any, job_id: str, *, due: datetime | None, now: datetime
    ) -> str:
        """Create the job's pending entry (create-only); its id, or an error.

        Raises ``EnqueueUnknownError`` (with the id) when S3 failed after the
        write was sent, and sending it once more did not settle whether it landed.
        """
        envelope = Envelope(payload=payload, enqueued_at=now.isoformat())
        body = envelope.encode()
        key = self._keys.queue(job_id)
        if due is not None:
            key = delay_feature.delayed_key(self._keys, due, job_id)
        meta = {META_WRITE: envelope.write}
        try:
            self._store.put(key, body, if_none_match=True, metadata=meta)
        except ConditionFailedError:
            self.write_stats.lost("enqueue")
            # Nobody else can hold a fresh ULID: this is our own earlier try,
            # resent after its response was lost. No read-back needed (a
            # producer granted PutObject on queue/ only could not read anyway).
            # A resend can also re-create an entry a worker already took and
            # finished; the claim's HEAD of done/{id} (its step 4) catches that.
            log.info("job %s: enqueued by an earlier try whose response was lost", job_id)
        except _REFUSED:
            raise  # the server refused the write: nothing was enqueued
        except StorageError as exc:
            return self._settle_unknown(key, body, meta, job_id, exc)
        return job_id

    def _settle_unknown(
        self, key: str, body: bytes, meta: dict[str, str], job_id: str, cause: StorageError
    ) -> str:
        """The write may have landed with every response lost: send the very same one again.

        Created, or refused because it is there (the first write's own: the id
        is fresh), the job is enqueued. This is the resend botocore makes, so
        the protocol already covers an entry re-created after its job ran
        (the claim's HEAD of ``done/{id}`` drops it).
        """
        log.warning(
            "job %s: enqueue failed after it was sent (%s); sending it again", job_id, cause
        )
        try:
            self._store.put(key, body, if_none_match=True, metadata=meta)
        except ConditionFailedError:
            return job_id
        except PailError as again:
            raise EnqueueUnknownError(job_id, again) from cause
        return job_id

    def enqueue_once(
        self,
        payload: Any,
        *,
        key: str,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        priority: str = Priority.NORMAL,
        due: datetime | None = None,
    ) -> dedup.EnqueueResult:
        """Enqueue ``payload`` unless a job with dedup ``key`` exists.

        Returns ``EnqueueResult(id, created)``: ``created`` is False when the
        key was already used, and ``id`` is then the existing job's. A key is
        remembered until ``forget_key`` (or a lifecycle rule on ``keys/``).
        ``delay``, ``not_before`` and ``priority`` work as in ``enqueue``.
        """
        if due is None:
            due = delay_feature.due_time(delay, not_before, now=delay_feature.utc_now())
            due = due_for(priority, due)
        return dedup.enqueue_keyed(
            self._store, self._keys, payload, key, due=due, stats=self.write_stats
        )

    def forget_key(self, key: str) -> None:
        """Forget dedup ``key``: the next enqueue with it creates a new job."""
        dedup.forget_key(self._store, self._keys, key)

    def enqueue_many(
        self,
        payloads: Sequence[Any],
        *,
        ids: Sequence[str] | None = None,
        max_workers: int = batch.DEFAULT_MAX_WORKERS,
    ) -> list[str]:
        """Enqueue every payload, ``max_workers`` PUTs at a time; return the ids in order.

        Every item is attempted. If some were not enqueued, ``BatchEnqueueError``
        says which: ``failed_indices`` surely were not (re-send them), and
        ``unknown`` maps the items that may have been (S3 failed after their
        write was sent) to their ids. Re-send those with ``ids=``: an item is
        then created under the given id, and one already there counts as
        enqueued, so a payload is never enqueued twice.
        """
        if ids is None:
            chosen = [new_job_id() for _ in payloads]
        else:
            chosen = [validate_job_id(job_id) for job_id in ids]
            if len(set(chosen)) != len(chosen):
                raise ConfigurationError("enqueue_many: ids must be distinct")

        def put(payload: Any, job_id: str) -> str:
            return self._put_pending(payload, job_id, due=None, now=delay_feature.utc_now())

        return batch.enqueue_many(put, payloads, chosen, max_workers=max_workers)

    def cancel(self, job_id: str) -> bool:
        """Cancel a job; True if it is cancelled, False if it had already ended.

        A pending job never runs. A running job's worker learns it at its next
        heartbeat (``Message.cancelled``) and its result is not recorded. The
        status becomes ``cancelled``. Raises ``JobNotFoundError`` for an unknown id.
        """
        return cancel.cancel(
            self._store, self._keys, validate_job_id(job_id), stats=self.write_stats
        )

    def _claimer(self) -> Claimer:
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        if claimer is None:
            claimer = Claimer(
                self._store,
                self._keys,
                visibility_timeout=self._policy.visibility_timeout,
                clock=self._clock,
                owner=self._owner,
                stats=self.write_stats,
            )
            self._local.claimer = claimer
        return claimer

    def claim(self) -> Message | None:
        """Claim one pending job, or return None if there is none.

        The job's lease is renewed in the background until you settle the
        message with ``complete`` or ``fail``.
        """
        lease = self._claimer().claim()
        if lease is None:
            return None
        return Message(self._store, self._keys, lease, self._policy, self._clock, self.write_stats)

    def work_once(self, handler: Handler, *, job_timeout: float | None = None) -> bool:
        """Process one job with ``handler(payload)``; False if the queue was empty.

        A job that raises is put back for a retry (or dead-lettered once
        retries are exhausted) and this still returns True.
        """
        message = self.claim()
        if message is None:
            return False
        run_message(handler, message, job_timeout=job_timeout)
        return True

    def work(
        self,
        handler: Handler,
        *,
        poll_interval: float = 20.0,
        min_poll_interval: float = 0.1,
        job_timeout: float | None = None,
        stop: threading.Event | None = None,
        max_jobs: int | None = None,
    ) -> int:
        """Process jobs until ``stop`` is set (or forever); return how many were processed.

        When the queue is empty it polls adaptively: from ``min_poll_interval``
        doubling up to ``poll_interval`` seconds, and back to the floor as soon
        as a job turns up.
        """
        polling = Polling(min_poll_interval, poll_interval)
        wait: float | None = None
        processed = 0
        while not (stop is not None and stop.is_set()):
            if max_jobs is not None and processed >= max_jobs:
                break
            try:
                found = self.work_once(handler, job_timeout=job_timeout)
            except StorageError as exc:
                log.warning("claim failed, backing off: %s", exc)
                found = False
            if found:
                processed += 1
                wait = None
                continue
            wait = polling.next(wait)
            self._clock.sleep(wait, wake=stop)
        return processed

    # -- reading ------------------------------------------------------------

    def result(self, job_id: str) -> Any:
        """The job's result: None until it is done, then the handler's return value.

        A handler that returned None has ``{}`` as its result. A dead-lettered
        job has no result (None); see ``status``.
        """
        obj = self._store.get(self._keys.done(validate_job_id(job_id)))
        if obj is None or obj.metadata.get(META_OUTCOME) == OUTCOME_DEAD:
            return None
        return decode_result(obj.body)

    def result_url(self, job_id: str, expires_in: int = 3600) -> str:
        """A presigned URL to GET the job's result object, valid ``expires_in`` seconds."""
        return self._store.presign_get(self._keys.done(validate_job_id(job_id)), expires_in)

    def status_urls(self, job_id: str, expires_in: int = 3600) -> dict[str, str]:
        """Presigned GET URLs for every object a job can be, keyed by state.

        A browser reads the job's status with no backend in the loop: the job
        is in whichever of these answers 200 (``docs/status-page.md`` has the
        JSON shapes). Keys: ``pending``, ``running``, ``done``, ``failed``.
        """
        job_id = validate_job_id(job_id)
        keys = {
            "pending": self._keys.queue(job_id),
            "running": self._keys.run(job_id),
            "done": self._keys.done(job_id),
            "failed": self._keys.dlq(job_id),
        }
        return {state: self._store.presign_get(key, expires_in) for state, key in keys.items()}

    def status(self, job_id: str) -> JobStatus | None:
        """The job's state, attempts, enqueue time and last error; None if unknown.

        A delayed job that is not due yet is ``pending``; finding it costs a
        listing of the delayed entries (only after its other keys were missed).
        """
        job_id = validate_job_id(job_id)
        found = read_status(self._store, self._keys, job_id)
        if found is None:
            found = delay_feature.read_delayed_status(self._store, self._keys, job_id)
        return found

    def stats(self) -> Stats:
        """Count the jobs in each state by listing every prefix of this queue."""
        done = self._list_ids(DONE)
        # An entry beside an outcome is a stalled worker's late write, not a
        # pending job (the claim that meets it drops it): done/ wins, as in status.
        ended = set(done)
        pending = [job_id for job_id in self._list_ids(QUEUE) if job_id not in ended]
        running = self._list_ids(RUN)
        failed = self._list_ids(DLQ)
        times = [t for t in (ulid_time(job_id) for job_id in pending) if t is not None]
        return Stats(
            pending=len(pending),
            running=len(running),
            # Dead-lettered jobs keep a null marker under done/ (the single
            # terminal key): they count as failed, not done.
            done=len(set(done) - set(failed)),
            failed=len(failed),
            oldest_pending=min(times) if times else None,
        )

    def _list_ids(self, state: str) -> list[str]:
        return [self._keys.job_id(info.key) for info in self._iter_prefix(state)]

    def _iter_prefix(self, state: str) -> Iterable[Any]:
        token: str | None = None
        while True:
            page = self._store.list(self._keys.prefix(state), continuation=token)
            yield from page.items
            if page.next_token is None:
                return
            token = page.next_token

    # -- operating ----------------------------------------------------------

    def reap(self) -> ReapReport:
        """Reclaim expired leases: requeue their jobs, or dead-letter them if retries are spent."""
        if self._reaper is None:
            self._reaper = Reaper(self._store, self._keys, self._policy, stats=self.write_stats)
        return self._reaper.reap()

    def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """The dead-lettered jobs, oldest first (in standard buckets), with their errors."""
        letters: list[DeadLetter] = []
        for info in self._iter_prefix(DLQ):
            if limit is not None and len(letters) >= limit:
                break
            obj = self._store.get(info.key)
            if obj is None:
                continue
            job_id = self._keys.job_id(info.key)
            try:
                letters.append(DeadLetter.decode(obj.body, job_id))
            except DecodeError as exc:
                log.warning("unreadable dead letter %s: %s", info.key, exc)
        return letters

    def delete_dead_letter(self, job_id: str, *, etag: str | None = None) -> bool:
        """Delete one dead letter; its dead marker stays, so the job stays ended (failed).

        With ``etag`` (from an inspection), only if it is still that record.
        False if it changed meanwhile; ``JobNotFoundError`` if there is none.
        See ``pail.operate.dead_letters``.
        """
        return dead_letter_ops.delete_dead_letter(
            self._store, self._keys, validate_job_id(job_id), etag=etag
        )

    def jobs(
        self,
        state: str = JobKind.PENDING,
        *,
        limit: int = 50,
        after: str | None = None,
        details: bool = True,
    ) -> JobPage:
        """Up to ``limit`` jobs in ``state`` with their age, oldest first; see ``pail.operate.jobs``.

        ``state`` is pending, delayed, running, done, dead or cancelled.
        ``JobPage.more`` says the listing stopped before the end;
        pass its ``next_after`` as ``after`` for the next page.
        """
        try:
            kind = JobKind(state)
        except ValueError:
            raise ConfigurationError(
                f"unknown job state {state!r}: use one of {', '.join(JobKind)}"
            ) from None
        return list_jobs(self._store, self._keys, kind, limit=limit, after=after, details=details)

    def purge(self, *, limit: int | None = None) -> purge_ops.PurgeReport:
        """Cancel every pending job (at most ``limit``); running jobs are never touched.

        Each purged job ends ``cancelled``; see ``pail.operate.purge`` for the cost.
        """
        return purge_ops.purge(self._store, self._keys, limit=limit, stats=self.write_stats)

    def queues(self) -> QueueList:
        """The queues (namespaces) in this bucket; ``""`` is the default queue."""
        return list_queues(self._store)

    def redrive(self, job_id: str | None = None, *, all: bool = False) -> list[str]:
        """Send dead-lettered jobs back to the queue with fresh attempts; return their ids.

        Pass one ``job_id``, or ``all=True`` for every dead letter.
        """
        if (job_id is None) == (not all):
            raise ConfigurationError("redrive needs exactly one of job_id or all=True")
        ids = [validate_job_id(job_id)] if job_id else self._list_ids(DLQ)
        return [i for i in ids if self._redrive_one(i)]

    def _redrive_one(self, job_id: str) -> bool:
        obj = self._store.get(self._keys.dlq(job_id))
        if obj is None:
            if self.status(job_id) is None:
                raise JobNotFoundError(f"no dead-lettered job {job_id!r}")
            return False  # not (or no longer) dead-lettered: nothing to redrive
        try:
            outcome = redrive.redrive(self._store, self._keys, job_id, obj, stats=self.write_stats)
        except DecodeError as exc:
            raise DecodeError(f"dead letter {job_id} is unreadable: {exc}") from exc
        if not outcome.done:
            log.info("job %s not redriven: %s", job_id, outcome.reason)
        return outcome.done


def build_client(
    *,
    endpoint_url: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> S3Client:
    """A boto3 S3 client with pail's retry and timeout settings."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    try:
        session = (
            boto3.session.Session(profile_name=profile) if profile else boto3.session.Session()
        )
    except ProfileNotFound as exc:
        raise ConfigurationError(f"AWS profile {profile!r} not found: {exc}") from exc
    config = Config(
        # SigV4 everywhere: S3 refuses SigV2 presigned URLs on buckets made since 2020.
        signature_version="s3v4",
        retries={"mode": "standard", "total_max_attempts": 5},
        connect_timeout=5,
        read_timeout=20,
        max_pool_connections=32,
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    client: S3Client = session.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        aws_session_token=session_token,
        region_name=region or session.region_name or "us-east-1",
        config=config,
    )
    return client
