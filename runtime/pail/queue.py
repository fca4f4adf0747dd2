"""``Pail``: the public face of one queue in one bucket."""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pail import tracing
from pail.bounds import (
    validate_count,
    validate_expiry,
    validate_max_retries,
    validate_seconds,
    validate_visibility_timeout,
)
from pail.clock import Clock, SystemClock
from pail.codec import (
    META_OUTCOME,
    OUTCOME_DEAD,
    DeadLetter,
    check_carried,
    decode_result,
)
from pail.config import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_MIN_POLL_INTERVAL,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_VISIBILITY_TIMEOUT,
    OVERLAP_THREADS,
    Settings,
    resolve_reclaim,
)
from pail.drain import Handler, Polling, ProcessLimits, drain
from pail.errors import (
    ConfigurationError,
    DecodeError,
    JobNotFoundError,
    PayloadError,
)
from pail.ids import new_job_id, validate_job_id
from pail.keys import DLQ, Keys
from pail.message import Message
from pail.protocol import cancel, dedup, dependencies, layout, redrive
from pail.protocol import limits as limiting
from pail.protocol import pause as pause_marker
from pail.protocol.claim import Claimer, Named
from pail.protocol.delay import Priority, due_for, due_time
from pail.protocol.delay import find as find_delayed
from pail.protocol.enqueue import DEFAULT_MAX_WORKERS, enqueue_many, put_pending
from pail.protocol.lease import Lease
from pail.protocol.limits.rate import Rate, RateLimits, SweepReport, set_rate, sweep
from pail.protocol.overlap import FLUSH_TIMEOUT, Overlap, Threads
from pail.protocol.reclaim import Reclaimer
from pail.protocol.retry import RetryPolicy
from pail.protocol.settle import Policy
from pail.protocol.writes import WriteStats
from pail.stats import Stats, count_jobs, entries
from pail.status import (
    JobStatus,
    locate,
    read_delayed_status,
    read_status,
    read_waiting_status,
)
from pail.store.base import Store
from pail.store.client import build_client
from pail.store.s3 import Mode, S3Store, store_for, validate_bucket_name
from pail.tags import Tags
from pail.tags import validate as validate_tags

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    # The operator's reads and actions, and the reaper, are imported where they
    # are called: a worker's cold start (the Lambda's) needs none of them.
    from pail.operate.jobs import JobPage
    from pail.operate.purge import PurgeReport
    from pail.operate.queues import QueueList
    from pail.operate.search import SearchPage
    from pail.protocol.reaper import Reaper, ReapReport
    from pail.protocol.schedules import ScheduleInfo

log = logging.getLogger("pail")


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
        bucket: str | Store,
        client: S3Client | None = None,
        *,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        max_retries: int | None = DEFAULT_MAX_RETRIES,
        queue: str = "",
        clock: Clock | None = None,
        owner: str | None = None,
        retry_policy: RetryPolicy | None = None,
        shards: int | None = None,
        reclaim: bool | None = None,
    ) -> None:
        """A queue on a bucket and a boto3 S3 client (pailq 0.1.1's constructor), or on a ``Store``.

        ``Pail("jobs", boto3.client("s3"))`` is 0.1.1's form; ``Pail(store)``
        (a ``MemoryStore``, an ``S3Store``) is pail's; ``Pail.connect`` builds
        the client for you. ``reclaim`` (default ``$PAIL_RECLAIM``, else
        true): claims reclaim expired leases themselves, at most once per
        visibility timeout (``pail.protocol.reclaim``); turn it off where a
        scheduled reaper runs.
        """
        self._store = _store_of(bucket, client)
        try:
            self._keys = Keys(queue, shards=1 if shards is None else shards)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        # Not given: the layout marker's count, read at the first operation
        # that needs it. Given above 1: written into the marker before the
        # first enqueue, claim or reap (pail.protocol.layout).
        self._explicit_shards = shards
        self._layout_lock = threading.Lock()
        self._layout_known = shards is not None
        self._marker_due = shards is not None and shards > 1
        self._policy = Policy(
            validate_max_retries(max_retries),
            validate_visibility_timeout(visibility_timeout),
            retry_policy,
        )
        self._clock = clock or SystemClock()
        self._owner = owner or _owner()
        self._local = threading.local()
        self._overlaps: list[Overlap] = []
        self._overlaps_lock = threading.Lock()
        self._reaper: Reaper | None = None
        self._reclaims = resolve_reclaim(reclaim)
        self._reclaimer = Reclaimer(
            self._reclaim_leases,
            interval=self._policy.visibility_timeout,
            monotonic=self._clock.monotonic,
            now=self._clock.now,
        )
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
        shards: int | None = None,
        reclaim: bool | None = None,
    ) -> Pail:
        """Connect to the queue in ``bucket``. Only this method builds a boto3 client.

        Credentials and region follow boto3's usual chain unless given.
        ``queue`` names a namespace, so several queues can share a bucket.
        ``retry_policy`` sets a backoff between attempts (default: none).
        ``shards`` spreads the queue's keys over that many prefixes (a power
        of two; 1 is the flat layout): see ``docs/scaling.md``. Not given,
        the count the queue's layout marker records is used (one shard if
        there is none), read once, at the first operation that needs it.
        ``reclaim`` is as in the constructor.
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
            shards=shards,
            reclaim=reclaim,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Pail:
        """Connect with resolved ``Settings``: how every entry point connects.

        >>> Pail.from_settings(Settings.from_env({"PAIL_BUCKET": "jobs"}))  # doctest: +SKIP
        """
        return cls.connect(
            settings.bucket,
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            profile=settings.profile,
            queue=settings.queue,
            visibility_timeout=settings.visibility_timeout,
            max_retries=settings.max_retries,
            shards=settings.shards,
            reclaim=settings.reclaim,
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
        """The queue's keys under its shard count: the one given, else the layout marker's.

        Without an explicit count, the first use reads the marker (1 GET,
        ``pail.protocol.layout``); the count is kept for this object's life.
        """
        if not self._layout_known:
            with self._layout_lock:
                if not self._layout_known:
                    shards = layout.discover(self._store, self._keys)
                    self._keys = Keys(self._keys.namespace, shards=shards)
                    self._layout_known = True
        return self._keys

    @property
    def namespace(self) -> str:
        """The queue's namespace (``""``: the default queue); known without a request."""
        return self._keys.namespace

    @property
    def explicit_shards(self) -> int | None:
        """The shard count this queue was given (argument, ``PAIL_SHARDS``, ``--shards``), or None."""
        return self._explicit_shards

    def _write_keys(self) -> Keys:
        """``keys``, after recording an explicit count above 1 in the layout marker (once)."""
        keys = self.keys
        if self._marker_due:
            with self._layout_lock:
                if self._marker_due:
                    layout.publish(self._store, keys, keys.shards, stats=self.write_stats)
                    self._marker_due = False
        return keys

    @property
    def clock(self) -> Clock:
        """The clock this queue reads time from (leases, handler timeouts, ``enqueued_at``)."""
        return self._clock

    @property
    def mode(self) -> Mode:
        """``Mode.EXPRESS`` for a directory bucket (its name ends in ``--x-s3``), else ``Mode.STANDARD``."""
        return Mode.for_bucket(self._store.bucket)

    @property
    def visibility_timeout(self) -> float:
        """Seconds a lease lives without renewal: a worker silent longer is taken for dead."""
        return self._policy.visibility_timeout

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between two renewals of a running job's lease: ``visibility_timeout / 3``."""
        return self._policy.visibility_timeout / 3

    @property
    def max_retries(self) -> int | None:
        """Retries after the first attempt before a job is dead-lettered; None: no ceiling."""
        return self._policy.max_retries

    @property
    def reclaims(self) -> bool:
        """Whether claims reclaim expired leases themselves, once per visibility timeout."""
        return self._reclaims

    @property
    def last_reclaim(self) -> datetime | None:
        """When this queue's last reclaim pass started (its clock), None before the first."""
        return self._reclaimer.last_reclaim

    # -- producing ----------------------------------------------------------

    def enqueue(
        self,
        payload: Any,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        priority: str = Priority.NORMAL,
        tags: Mapping[str, str] | None = None,
        after: Sequence[str] | None = None,
        then: Sequence[str] | None = None,
        on_failure: str = dependencies.DEAD_LETTER,
        group: str | None = None,
    ) -> str:
        """Add a job; return its id (a 26-character ULID; ``{ULID}~{group}`` with a ``group``).

        The payload must be strict JSON (no NaN or Infinity) nested at most
        100 levels; if it is not, ``PayloadError`` says where and nothing is
        written. With a dedup ``key``, at most one
        job per key is enqueued and a repeat returns the first job's id (use
        ``enqueue_once`` to learn whether this call created it). With
        ``delay`` (seconds or a ``timedelta``) or ``not_before`` (an aware
        ``datetime``) the job is not claimable before that time. A ``"high"``
        ``priority`` job is claimed before the normal backlog. ``tags``
        (``{"customer": "acme"}``, bounds in ``pail.tags``) label the job for
        ``search``; each costs one more PUT, and an untagged job none.

        **Dependencies** (``docs/dependencies.md``): with ``after`` the job
        *waits* (state ``waiting``) until every job it names has succeeded,
        then becomes pending once. Jobs that exist already are looked at by
        the reaper's pass or a worker's reclaim pass (the promotion comes at
        most one pass after the last one succeeded); jobs enqueued afterwards with ``then=[this id]``
        tell it at once when they end (``enqueue_flow`` and ``enqueue_chain``
        do both for you). ``on_failure`` says what a dead-lettered dependency does to it:
        ``"dead-letter"`` (its error names the dependency), ``"cancel"``, or
        ``"wait"`` (for a redrive of the dependency). A cancelled dependency
        cancels it. ``after`` goes with no ``delay`` or ``priority``; with a
        ``key``, the key names the waiting job (a repeat returns its id and
        writes nothing, or repairs a producer that crashed half-way with the
        waiting record: docs/dependencies.md, "Dedup keys and ``after=``").

        A ``group`` (``"tenant-42"``) puts the job under its group's concurrency
        limit and in the fair sharing across groups (``set_limit``, docs/limits.md).
        """
        checked = validate_tags(tags)
        now = self._clock.now()
        due = due_for(priority, due_time(delay, not_before, now=now))
        if after is not None:
            if due is not None:
                raise ConfigurationError("after= goes with no delay, not_before or priority")
            if key is not None:
                return self.enqueue_once(
                    payload,
                    key=key,
                    tags=checked,
                    group=group,
                    after=_ids(after),
                    then=_ids(then),
                    on_failure=on_failure,
                ).id
            return dependencies.put_waiting(
                self._store,
                self._write_keys(),
                payload,
                new_job_id() if group is None else limiting.grouped_id(new_job_id(), group),
                _ids(after),
                now=now,
                then=_ids(then),
                on_failure=on_failure,
                tags=checked,
                stats=self.write_stats,
                late=True,
            )
        if then and (key is not None or due is not None):
            raise ConfigurationError(
                "then= goes with no delay, not_before or priority, and with a key only beside after="
            )
        if key is not None:
            return self.enqueue_once(payload, key=key, due=due, tags=checked, group=group).id
        job_id = new_job_id() if group is None else limiting.grouped_id(new_job_id(), group)
        with tracing.sending(self._destination()) as trace:
            job_id = put_pending(
                self._store,
                self._write_keys(),
                payload,
                job_id,
                now=now,
                due=due,
                stats=self.write_stats,
                tags=checked,
                trace=trace,
                then=_ids(then),
            )
            if trace is not None:
                tracing.sent(job_id)
            return job_id

    def enqueue_flow(
        self,
        children: Sequence[Any],
        *,
        then: Any,
        on_failure: str = dependencies.DEAD_LETTER,
    ) -> dependencies.Flow:
        """Fan-in: enqueue ``children``, and ``then`` to run once after all of them succeeded.

        ``then``'s handler reads their results (``current_job().dependencies``).
        The continuation's waiting record is written first, then each child
        naming it. ``on_failure`` as in ``enqueue``. From inside a handler use
        ``current_job().fan_out`` instead: a crash half-way is repaired there.

        >>> from pail import Pail, MemoryStore
        >>> queue = Pail(MemoryStore("jobs"))
        >>> flow = queue.enqueue_flow([{"region": "eu"}, {"region": "us"}], then={"merge": True})
        >>> queue.status(flow.then).state.value, len(flow.children)
        ('waiting', 2)
        """
        flow = dependencies.Flow(tuple(new_job_id() for _ in children), new_job_id())
        return dependencies.enqueue_flow(
            self._store,
            self._write_keys(),
            flow,
            children,
            then,
            now=self._clock.now(),
            on_failure=on_failure,
            stats=self.write_stats,
        )

    def enqueue_chain(self, payloads: Sequence[Any]) -> list[str]:
        """A chain: each job runs after the one before it succeeded; the ids in order.

        The last job's waiting record is written first and the first job's
        entry last, so every job exists before the one it waits for.
        """
        ids = [new_job_id() for _ in payloads]
        return dependencies.enqueue_chain(
            self._store,
            self._write_keys(),
            payloads,
            ids,
            now=self._clock.now(),
            stats=self.write_stats,
        )

    def results(self, job_ids: Sequence[str]) -> dict[str, Any]:
        """The result of each job (None if it has none yet, or none readable): one GET per job."""
        return dependencies.results(self._store, self.keys, [validate_job_id(j) for j in job_ids])

    def enqueue_once(
        self,
        payload: Any,
        *,
        key: str,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        priority: str = Priority.NORMAL,
        due: datetime | None = None,
        tags: Mapping[str, str] | None = None,
        group: str | None = None,
        after: Sequence[str] | None = None,
        then: Sequence[str] | None = None,
        on_failure: str = dependencies.DEAD_LETTER,
    ) -> dedup.EnqueueResult:
        """Enqueue ``payload`` unless a job with dedup ``key`` exists.

        Returns ``EnqueueResult(id, created)``: ``created`` is False when the
        key was already used, and ``id`` is then the existing job's. A key is
        remembered until ``forget_key`` (or a lifecycle rule on ``keys/``).
        ``delay``, ``not_before``, ``priority``, ``tags``, ``group``, ``after``,
        ``then`` and ``on_failure`` work as in ``enqueue``.
        """
        checked = validate_tags(tags)
        now = self._clock.now()
        if due is None:
            due = due_for(priority, due_time(delay, not_before, now=now))
        if after is not None and due is not None:
            raise ConfigurationError("after= goes with no delay, not_before or priority")
        with tracing.sending(self._destination()) as trace:
            made = dedup.enqueue_keyed(
                self._store,
                self._write_keys(),
                payload,
                key,
                now=now,
                due=due,
                stats=self.write_stats,
                tags=checked,
                trace=trace,
                group=group,
                after=None if after is None else _ids(after),
                then=_ids(then),
                on_failure=on_failure,
            )
            if trace is not None:
                tracing.sent(made.id)
            return made

    def forget_key(self, key: str) -> None:
        """Forget dedup ``key``: the next enqueue with it creates a new job."""
        # keys/ is not sharded: no need to know the layout.
        dedup.forget_key(self._store, self._keys, key)

    def enqueue_many(
        self,
        payloads: Sequence[Any],
        *,
        ids: Sequence[str] | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        tags: Mapping[str, str] | Sequence[Mapping[str, str] | None] | None = None,
        then: Sequence[str] | None = None,
        group: str | None = None,
    ) -> list[str]:
        """Enqueue every payload, ``max_workers`` PUTs at a time; return the ids in order.

        Every item is attempted. If some were not enqueued, ``BatchEnqueueError``
        says which: ``failed_indices`` surely were not (re-send them), and
        ``unknown`` maps the items that may have been (S3 failed after their
        write was sent) to their ids. Re-send those with ``ids=``: an item is
        then created under the given id, and one already there counts as
        enqueued, so a payload is never enqueued twice. ``tags`` is one mapping
        for every item, or a sequence of them (None for an untagged item), one per payload.
        ``then`` names the jobs that wait for every one of these (``enqueue(after=...)``).
        ``group`` puts every new id in that group; re-sent ``ids=`` already name theirs.
        """
        labels = _batch_tags(tags, len(payloads))
        if ids is None:
            chosen = [
                new_job_id() if group is None else limiting.grouped_id(new_job_id(), group)
                for _ in payloads
            ]
        else:
            chosen = [validate_job_id(job_id) for job_id in ids]
            if len(set(chosen)) != len(chosen):
                raise ConfigurationError("enqueue_many: ids must be distinct")

        keys = self._write_keys() if payloads else self._keys  # nothing to send: no request
        edges = _ids(then)

        def put(payload: Any, job_id: str) -> str:
            now = self._clock.now()
            return put_pending(
                self._store,
                keys,
                payload,
                job_id,
                now=now,
                stats=self.write_stats,
                tags=labels[job_id_index[job_id]],
                trace=trace,
                then=edges,
            )

        job_id_index = {job_id: n for n, job_id in enumerate(chosen)}
        if not payloads:
            return []
        # One send span for the batch: every job carries its context.
        with tracing.sending(self._destination(), len(payloads)) as trace:
            return enqueue_many(put, payloads, chosen, max_workers=max_workers)

    def _destination(self) -> str:
        return tracing.destination(self.bucket, self.namespace)

    def cancel(self, job_id: str) -> bool:
        """Cancel a job; True if it is cancelled, False if it had already ended.

        A pending job never runs. A running job's worker learns it at its next
        heartbeat (``Message.cancelled``) and its result is not recorded. The
        status becomes ``cancelled``. Raises ``JobNotFoundError`` for an unknown id.
        """
        return cancel.cancel(
            self._store, self.keys, validate_job_id(job_id), stats=self.write_stats
        )

    def _claimer(self) -> Claimer:
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        if claimer is None:
            claimer = Claimer(
                self._store,
                self._write_keys(),
                visibility_timeout=self._policy.visibility_timeout,
                clock=self._clock,
                owner=self._owner,
                stats=self.write_stats,
                overlap=self._overlap(),
            )
            self._local.claimer = claimer
        return claimer

    @property
    def claims_paused(self) -> bool:
        """True when this thread's last claim found the queue paused (no request: what it saw).

        ``claim()`` returns None both for an empty queue and a paused one;
        this tells them apart, as the drain does to log it and to stop with
        ``StopReason.PAUSED``.
        """
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        return claimer is not None and claimer.paused

    def _overlap(self) -> Overlap:
        """This thread's overlap pool (``pail.protocol.overlap``): one per worker thread."""
        overlap: Overlap | None = getattr(self._local, "overlap", None)
        if overlap is None:
            overlap = Threads(OVERLAP_THREADS, sleep=self._clock.sleep)
            self._local.overlap = overlap
            with self._overlaps_lock:
                self._overlaps.append(overlap)
        return overlap

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait for the requests jobs left in flight (lease removals, a read ahead); True if none is left.

        ``complete`` returns once the result is written and removes the lease
        in the background. ``work``, the runner and the worker Lambda call
        this before they return; after ``work_once`` or ``claim`` the next
        call, this, or the interpreter's exit (waiting at most 3 s) lets them land. One that never
        lands costs nothing but time: the reaper removes a lease whose job has
        an outcome once the lease expires.
        """
        with self._overlaps_lock:
            overlaps = list(self._overlaps)
        return all([overlap.flush(timeout) for overlap in overlaps])

    def claim(self) -> Message | None:
        """Claim one pending job, or return None if there is none.

        The job's lease is renewed in the background until you settle the
        message with ``complete`` or ``fail``.
        """
        return self._claim(polling=False)

    def poll(self) -> Message | None:
        """``claim`` for a loop that claims again while the queue is empty (``work``).

        In a sharded queue, a poll after an empty one lists one shard instead
        of every shard, so an idle worker costs one LIST per poll whatever the
        shard count; a queue of one shard is claimed as by ``claim``.
        """
        return self._claim(polling=True)

    def claim_key(self, key: str) -> Message | None:
        """Claim the job whose pending entry is ``key``, without listing (an S3 event named it).

        ``key`` is the object key an *Object Created* event carries
        (``queue/{id}``, with the namespace and shard segment if any). None if
        it gives no job; ``named_claim_found`` then says why (``Named``: gone,
        taken, paused, a delayed entry, a key of no pending job...). An entry
        that is gone costs one GET. See ``pail.protocol.claim``.
        """
        # No reclaim pass here: a named claim makes no listing (the event-driven
        # worker Lambda runs beside the scheduled reaper); ``claim`` and ``poll`` do.
        claimer = self._claimer()
        return self._message(claimer, claimer.claim_key(key))

    @property
    def named_claim_found(self) -> Named | None:
        """What this thread's last ``claim_key`` found (no request); None before the first."""
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        return None if claimer is None else claimer.named

    def _claim(self, *, polling: bool) -> Message | None:
        self._before_claim()
        claimer = self._claimer()
        return self._message(claimer, claimer.claim(polling=polling))

    def _before_claim(self) -> None:
        if self._reclaims:
            self._reclaimer.before_claim()  # one clock read, and a pass once per interval

    def _message(self, claimer: Claimer, lease: Lease | None) -> Message | None:
        if lease is None:
            return None
        # The lease's keys: its shard's, where every write about the job goes.
        return Message(
            self._store,
            lease.keys,
            lease,
            self._policy,
            self._clock,
            self.write_stats,
            overlap=self._overlap(),
            read_ahead=claimer.read_ahead,
        )

    def work_once(self, handler: Handler, *, job_timeout: float | None = None) -> bool:
        """Process one job with ``handler(payload)``; False if the queue was empty (or paused).

        A job that raises is put back for a retry (or dead-lettered once
        retries are exhausted) and this still returns True. ``job_timeout``
        (seconds, finite, above 0) fails an attempt whose handler runs longer.
        The job runs as every entry point runs it (``pail.drain``): an
        ``async def`` handler is awaited on an event loop of its own, and the
        handler can read its job with ``pail.current_job()``. A storage error
        on the claim is raised; one while the outcome is recorded is logged
        (the job's lease expires and the reaper retries it). It returns once
        the outcome is written: the lease's removal may still be in flight
        (the next call, ``flush`` or the interpreter's exit lets it land).
        A ``KeyboardInterrupt`` or ``SystemExit`` (a Ctrl-C, or raised by the
        handler) propagates, and the job goes back unstarted: pending, its
        attempt not spent (``pail.drain``, "Interrupts").
        """
        _validate_job_timeout(job_timeout)
        tally = drain(
            self.claim,
            handler,
            self._limits(stop=None),
            max_jobs=1,
            job_timeout=job_timeout,
            clock=self._clock,
            paused=lambda: self.claims_paused,
            limited=self.claims_limited_for,
        )
        if tally.processed == 0 and tally.error is not None:
            raise tally.error  # the claim failed: say so, as ``claim()`` would
        return tally.processed > 0

    def work(
        self,
        handler: Handler,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        min_poll_interval: float = DEFAULT_MIN_POLL_INTERVAL,
        job_timeout: float | None = None,
        stop: threading.Event | None = None,
        max_jobs: int | None = None,
    ) -> int:
        """Process jobs until ``stop`` is set (or forever); return how many were processed.

        When the queue is empty (or paused: ``pause()``, which it logs) it
        polls adaptively: from ``min_poll_interval`` doubling up to
        ``poll_interval`` seconds, and back to the floor as soon as a job
        turns up; storage errors back off the same way. Intervals are
        finite seconds (at most a year); ``max_jobs`` is a whole number or None.
        Jobs run as in ``work_once``. Once ``stop`` is set nothing more is
        claimed, and the running job's ``current_job().stopping`` is set; it
        runs to its end (bounded by ``job_timeout``). A job whose claim was
        in flight when ``stop`` was set goes back to the queue unstarted.
        A ``KeyboardInterrupt`` or ``SystemExit`` ends it as in ``work_once``.
        """
        validate_seconds("min_poll_interval", min_poll_interval)
        validate_seconds("poll_interval", poll_interval, minimum=min_poll_interval)
        _validate_job_timeout(job_timeout)
        if max_jobs is not None:
            validate_count("max_jobs", max_jobs)
        tally = drain(
            self.poll,
            handler,
            self._limits(stop=stop),
            max_jobs=max_jobs,
            job_timeout=job_timeout,
            polling=Polling(min_poll_interval, poll_interval),
            clock=self._clock,
            paused=lambda: self.claims_paused,
            flush=self.flush,
            limited=self.claims_limited_for,
        )
        return tally.processed

    def _limits(self, stop: threading.Event | None) -> ProcessLimits:
        # No deadline and no grace period: a started job runs to its end.
        return ProcessLimits(
            time_budget=None, grace_period=math.inf, stop=stop, clock=self._clock.monotonic
        )  # the same clock drain() is given

    # -- reading ------------------------------------------------------------

    def result(self, job_id: str) -> Any:
        """The job's result: None until it is done, then the handler's return value.

        A handler that returned None has ``{}`` as its result. A dead-lettered
        job has no result (None); see ``status``.
        """
        job_id = validate_job_id(job_id, stored=True)
        obj = None
        for place in self.keys.layouts(job_id):
            obj = self._store.get(place.done(job_id))
            if obj is not None:
                break
        if obj is None or obj.metadata.get(META_OUTCOME) == OUTCOME_DEAD:
            return None
        return decode_result(obj.body)

    def result_url(self, job_id: str, expires_in: int = 3600) -> str:
        """A presigned URL to GET the job's result object, valid ``expires_in`` seconds (1 to 604800)."""
        expires_in = validate_expiry(expires_in)
        job_id = validate_job_id(job_id, stored=True)
        keys = locate(self._store, self.keys, job_id)
        return self._store.presign_get(keys.done(job_id), expires_in)

    def status_urls(self, job_id: str, expires_in: int = 3600) -> dict[str, str]:
        """Presigned GET URLs for every object a job can be, keyed by state.

        A browser reads the job's status with no backend in the loop: the job
        is in whichever of these answers 200 (``docs/status-page.md`` has the
        JSON shapes). Keys: ``pending``, ``running``, ``done``, ``failed``,
        and ``delayed`` while the job waits for its due time (a delayed or
        high-priority job not promoted yet): finding that entry costs one
        LIST of the delayed entries; ``waiting`` while it waits for its
        dependencies (one GET more, for a job that is not delayed);
        everything else is presigned locally.
        ``expires_in`` is 1 to 604800 seconds (7 days, S3's limit). In a
        sharded queue that grew, a job of an earlier shard count is found
        first (a few HEADs, ``pail.status.locate``).
        """
        job_id = validate_job_id(job_id, stored=True)
        expires_in = validate_expiry(expires_in)
        layout = locate(self._store, self.keys, job_id)
        keys = {
            "pending": layout.queue(job_id),
            "running": layout.run(job_id),
            "done": layout.done(job_id),
            "failed": layout.dlq(job_id),
        }
        waiting = find_delayed(self._store, self.keys, job_id)
        if waiting is not None:
            keys["delayed"] = waiting.key
        else:
            parked = dependencies.find(self._store, self.keys, job_id)
            if parked is not None:
                keys["waiting"] = parked[1].key
        return {state: self._store.presign_get(key, expires_in) for state, key in keys.items()}

    def status(self, job_id: str) -> JobStatus | None:
        """The job's state, attempts, enqueue time and last error; None if unknown.

        A delayed job that is not due yet is ``pending``; finding it costs a
        listing of the delayed entries (only after its other keys were missed).
        A job waiting for its dependencies is ``waiting``: found last, after
        that listing (one GET more).
        """
        job_id = validate_job_id(job_id, stored=True)
        found = read_status(self._store, self.keys, job_id)
        if found is None:
            found = read_delayed_status(self._store, self.keys, job_id)
        if found is None:
            found = read_waiting_status(self._store, self.keys, job_id)
        return found

    def stats(self) -> Stats:
        """Count the jobs in each state by listing every prefix of this queue.

        pailq 0.1.1's tuple: ``pending, running, done, failed, oldest_pending =
        pail.stats()``, ``oldest_pending`` the age of the oldest pending job (a
        ``timedelta``, None when none waits); ``delayed``, ``cancelled`` and
        ``oldest_pending_at`` are attributes. See ``pail.stats``.

        Keys that name no job (the S3 console's zero-byte folders) are not
        counted. Telling a cancelled job from a success costs one HEAD per
        ``done/`` object of a marker's size; nothing else is read.
        """
        return count_jobs(self._store, self.keys)

    # -- operating ----------------------------------------------------------

    def reclaim(self) -> ReapReport:
        """Recover expired leases now (pailq 0.1.1's name): one pass over the leases, whatever the throttle.

        Claims call it themselves once per visibility timeout unless
        ``reclaim=False``; this pass counts as theirs (``last_reclaim``).
        """
        return self._reclaimer.reclaim()

    def reap(self) -> ReapReport:
        """Reclaim expired leases: requeue their jobs, or dead-letter them if retries are spent.

        Then run the schedules' due ticks (``pail.protocol.schedules``).
        """
        return self._the_reaper().reap()

    def _reclaim_leases(self) -> ReapReport:
        # The workers' pass (and reclaim()) is 0.1.1's: the leases, no schedule ticks;
        # the slots, once this worker's claims met a concurrency limit; and the
        # waiting jobs' late edges (one LIST of wait/), which only a pass promotes.
        reaper = self._the_reaper()
        report = reaper.reclaim_leases()
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        if claimer is not None and claimer.gate.active:
            report.slots = reaper.recover_slots()
        report.dependencies = reaper.run_dependencies(report)
        return report

    def _the_reaper(self) -> Reaper:
        if self._reaper is None:
            from pail.protocol.dependencies.repair import Repairer
            from pail.protocol.reaper import Reaper
            from pail.protocol.schedules import Ticker

            keys = self._write_keys()
            self._reaper = Reaper(
                self._store,
                keys,
                self._policy,
                stats=self.write_stats,
                ticker=Ticker(self._store, keys, stats=self.write_stats),
                repairer=Repairer(self._store, keys, stats=self.write_stats),
            )
        return self._reaper

    # -- schedules (pail.protocol.schedules, docs/schedules.md) ---------------

    def schedule(
        self,
        name: str,
        payload: Any,
        *,
        cron: str | None = None,
        every: float | timedelta | None = None,
        timezone: str = "UTC",
        catch_up: int = 1,
        tags: Mapping[str, str] | None = None,
    ) -> ScheduleInfo:
        """Create or replace schedule ``name``: enqueue ``payload`` at each tick, one job per tick.

        Give ``cron`` (5 fields or an alias such as ``@daily``, evaluated in
        ``timezone``) or ``every`` (whole seconds or a ``timedelta``; ticks at
        multiples of it since the epoch). Ticks are run by the reaper's pass
        (the deployed reaper Lambda, ``pail reap --every``). After a gap, a
        pass enqueues the latest ``catch_up`` missed ticks (default: only the
        latest). ``tags`` are given to every job a tick enqueues (as in
        ``enqueue``). Returns the schedule with its next due time.
        """
        from pail.protocol.schedules import definition, registry
        from pail.protocol.schedules.timing import Timing

        written = registry.put(
            self._store,
            self._keys,
            definition.Schedule(
                name=definition.validate_name(name),
                payload=_checked_payload(payload),
                timing=Timing.of(cron=cron, every=every, timezone=timezone),
                created=self._clock.now(),
                catch_up=definition.validate_catch_up(catch_up),
                tags=validate_tags(tags),
            ),
            stats=self.write_stats,
        )
        return registry.ScheduleInfo(written, written.timing.next_after(self._clock.now()))

    def pause_schedule(self, name: str, *, paused: bool = True) -> ScheduleInfo | None:
        """Pause schedule ``name`` (``paused=False``: resume it); None if there is none.

        While paused, no tick is due; on resuming, the ticks that fell during
        the pause are not enqueued (resuming is not a gap to catch up).
        """
        from pail.protocol.schedules import registry

        done = registry.set_paused(
            self._store, self._keys, name, paused, now=self._clock.now(), stats=self.write_stats
        )
        return (
            None
            if done is None
            else registry.ScheduleInfo(done, done.timing.next_after(self._clock.now()))
        )

    def unschedule(self, name: str) -> bool:
        """Remove schedule ``name``; False if there was none. Jobs it already enqueued stay."""
        from pail.protocol.schedules import registry

        return registry.remove(self._store, self._keys, name)

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name, with its next due time and the id of the last job it enqueued.

        One LIST and one GET per schedule; unreadable definitions are logged and left out.
        """
        from pail.protocol.schedules import registry

        return registry.read_all(self._store, self._keys)[0]

    def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """The dead-lettered jobs, oldest first (in standard buckets), with their errors.

        A ``dlq/`` object that is not a dead letter (another writer's bytes)
        is listed too, as a quarantined letter: its raw bytes, and the decode
        error as its error. A record a redrive took back, landed late by a
        writer that crashed (``redrive.leftover_letter``), is removed instead
        of listed: one HEAD per letter.
        """
        if limit is not None:
            validate_count("limit", limit)
        letters: list[DeadLetter] = []
        for job_id, info in entries(self._store, self.keys, DLQ):
            if limit is not None and len(letters) >= limit:
                break
            obj = self._store.get(info.key)
            if obj is None:
                continue
            try:
                letter = DeadLetter.decode(obj.body, job_id)
            except DecodeError as exc:
                log.warning("unreadable dead letter %s: %s", info.key, exc)
                letters.append(DeadLetter.unreadable(job_id, obj.body, exc))
                continue
            if not redrive.leftover_letter(
                self._store, self.keys.of_key(info.key, DLQ), letter, obj.etag
            ):
                letters.append(letter)
        return letters

    def delete_dead_letter(self, job_id: str, *, etag: str | None = None) -> bool:
        """Delete one dead letter; its dead marker stays, so the job stays ended (failed).

        With ``etag`` (from an inspection), only if it is still that record.
        False if it changed meanwhile; ``JobNotFoundError`` if there is none.
        See ``pail.operate.dead_letters``.
        """
        from pail.operate import dead_letters as dead_letter_ops

        return dead_letter_ops.delete_dead_letter(
            self._store, self.keys, validate_job_id(job_id, stored=True), etag=etag
        )

    def jobs(
        self,
        state: str = "pending",
        *,
        limit: int = 50,
        after: str | None = None,
        details: bool = True,
    ) -> JobPage:
        """Up to ``limit`` jobs in ``state`` with their age, oldest first; see ``pail.operate.jobs``.

        ``state`` is one of ``pail.stats.STATES`` (pending, delayed, waiting,
        running, done, failed, cancelled), as ``stats()`` counts them; ``dead`` is
        ``failed``'s older name. ``JobPage.more`` says the listing stopped before the end;
        pass its ``next_after`` as ``after`` for the next page.
        """
        from pail.operate.jobs import list_jobs
        from pail.operate.objects import JobKind

        validate_count("limit", limit, minimum=1, maximum=MAX_PAGE_LIMIT)
        try:
            kind = JobKind.DEAD if state == "failed" else JobKind(state)
        except ValueError:
            raise ConfigurationError(
                f"unknown job state {state!r}: use one of {', '.join(JobKind)}"
            ) from None
        return list_jobs(self._store, self.keys, kind, limit=limit, after=after, details=details)

    def search(
        self,
        *,
        tags: Mapping[str, str] | None = None,
        state: str | None = None,
        since: datetime | timedelta | None = None,
        until: datetime | None = None,
        id_prefix: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> SearchPage:
        """Jobs matching every part given, oldest first, ``limit`` a page; see ``pail.operate.search``.

        ``tags`` must all match (the index answers the first); ``state`` is
        pending, running, done, failed or cancelled; ``since`` (an aware
        datetime, or a ``timedelta`` back from now) and ``until`` bound the
        enqueue time, a key range of the ULID ids. ``SearchPage.requests``
        says what the page cost; pass its ``next_after`` as ``after`` for the next.
        """
        from pail.operate.search import MAX_LIMIT, Query
        from pail.operate.search import search as search_jobs

        validate_count("limit", limit, minimum=1, maximum=MAX_LIMIT)
        if isinstance(since, timedelta):
            since = self._clock.now() - since
        query = Query.checked(tags=tags, state=state, since=since, until=until, id_prefix=id_prefix)
        return search_jobs(
            self._store, self.keys, query, limit=limit, after=after, now=self._clock.now()
        )

    def purge(self, *, limit: int | None = None) -> PurgeReport:
        """Cancel every pending and waiting job (at most ``limit``); running jobs are never touched.

        Each purged job ends ``cancelled`` (a waiting job's dependents too, as
        ``cancel``); see ``pail.operate.purge`` for the cost.
        """
        if limit is not None:
            validate_count("limit", limit)
        from pail.operate import purge as purge_ops

        return purge_ops.purge(self._store, self.keys, limit=limit, stats=self.write_stats)

    # -- limits (pail.protocol.limits, docs/limits.md) -----------------------

    def set_limit(self, concurrency: int | None, *, group: str | None = None) -> limiting.Limits:
        """Let at most ``concurrency`` jobs run at once (None removes the limit); the limits now.

        ``group=None``: the whole queue, across every worker and entry point;
        ``group="*"``: each group without a limit of its own; ``group="tenant-42"``:
        that group's own. Workers learn it within ``limits.gate.REFRESH`` seconds
        (a first limit of a queue that had none: ``limits.gate.ABSENT_REFRESH``).

        >>> from pail.store.memory import MemoryStore
        >>> Pail(MemoryStore()).set_limit(5).concurrency
        5
        """
        return limiting.set_limit(
            self._store, self._keys, concurrency, group=group, stats=self.write_stats
        )

    def set_rate(self, rate: str | Rate | None, *, group: str | None = None) -> RateLimits:
        """At most ``rate`` job starts per period (``"10/s"``, ``"1000/h"``; None removes it).

        ``group`` as in ``set_limit``. Workers learn it within ``limits.gate.REFRESH``
        seconds (``ABSENT_REFRESH`` on a queue that had no limit); ``docs/limits.md``
        ("Rate limits") has the guarantee.

        >>> from pail.store.memory import MemoryStore
        >>> str(Pail(MemoryStore()).set_rate("10/s").queue)
        '10/s'
        """
        parsed = Rate.parse(rate) if isinstance(rate, str) else rate
        return set_rate(self._store, self._keys, parsed, group=group, stats=self.write_stats)

    def sweep_rate_tokens(self, *, max_deletes: int = 1000) -> SweepReport:
        """Delete the start tokens of rate windows that are over (``rate.sweep``), at most ``max_deletes``.

        What the construct's lifecycle rule does for a deployed bucket; run it
        (``pail limit sweep``) where there is none.
        """
        return sweep(self._store, self._keys, max_deletes=max_deletes)

    def rate_limits(self) -> RateLimits:
        """The queue's rate limits (one GET: the limits object); none set: ``RateLimits()``."""
        return RateLimits.from_json(self.limits().extra.get("rate"))

    def limits(self) -> limiting.Limits:
        """The queue's concurrency limits (one GET); ``Limits()`` (all None) when it has none."""
        return limiting.read(self._store, self._keys)

    def clear_limits(self) -> bool:
        """Remove every concurrency limit of the queue; False if it had none."""
        return limiting.clear(self._store, self._keys)

    def claims_limited_for(self) -> float | None:
        """If this thread's last claim found the queue at a limit, the seconds it stays so; else None."""
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        return None if claimer is None else claimer.limited_for()

    @property
    def knows_limits(self) -> bool:
        """True when this thread's claimer has read limits that gate its claims (no request)."""
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        return claimer is not None and claimer.gate.active

    def limited_now(self) -> float | None:
        """Seconds the queue stays at a limit, or None if a job may start: at most 2 requests.

        What a worker Lambda asks first (``limits.gate.Gate.blocked``).
        """
        return self._claimer().gate.blocked()

    @property
    def claims_limited(self) -> bool:
        """True when this thread's last claim found the queue at its concurrency limit (no request)."""
        claimer: Claimer | None = getattr(self._local, "claimer", None)
        return claimer is not None and claimer.limited

    def pause(self, reason: str | None = None) -> bool:
        """Pause the queue: workers claim no job until ``resume()``; False if it was paused already.

        Running jobs finish; each worker stops claiming at its next page
        refill (at most a page of claims, and never a page older than the
        visibility timeout). One PUT. See ``pail.protocol.pause``.

        >>> from pail.store import MemoryStore
        >>> queue = Pail(MemoryStore("jobs"))
        >>> _ = queue.enqueue({"n": 1})
        >>> queue.pause("deploying"), queue.pause(), queue.work_once(print)
        (True, False, False)
        >>> queue.resume(), queue.paused() is None
        (True, True)
        """
        return pause_marker.pause(
            self._store, self._keys, by=self._owner, reason=reason, stats=self.write_stats
        )

    def resume(self) -> bool:
        """Resume a paused queue; False if it was not paused. A HEAD and a DELETE."""
        return pause_marker.resume(self._store, self._keys)

    def paused(self) -> pause_marker.PauseState | None:
        """Whether the queue is paused, since when, by whom and why (one GET); None if not."""
        return pause_marker.read(self._store, self._keys)

    def queues(self) -> QueueList:
        """The queues (namespaces) in this bucket; ``""`` is the default queue."""
        from pail.operate.queues import list_queues

        return list_queues(self._store)

    def redrive(self, job_id: str | None = None, *, all: bool = False) -> list[str]:
        """Send dead-lettered jobs back to the queue with fresh attempts; return their ids.

        Pass one ``job_id``, or ``all=True`` for every dead letter. A
        quarantined letter (foreign bytes dead-lettered as found, ``raw``)
        holds no job to send back: ``all=True`` passes it by (logged), and
        naming it raises ``DecodeError``; read it with ``pail dlq show``.
        """
        if (job_id is None) == (not all):
            raise ConfigurationError("redrive needs exactly one of job_id or all=True")
        if job_id is not None:
            return [job_id] if self._redrive_one(validate_job_id(job_id), named=True) else []
        ids = [job_id for job_id, _ in entries(self._store, self.keys, DLQ)]
        return [i for i in ids if _redrivable(i) and self._redrive_one(i, named=False)]

    def _redrive_one(self, job_id: str, *, named: bool) -> bool:
        keys = locate(self._store, self.keys, job_id)
        obj = self._store.get(keys.dlq(job_id))
        if obj is None:
            if named and self.status(job_id) is None:
                raise JobNotFoundError(f"no dead-lettered job {job_id!r}")
            return False  # not (or no longer) dead-lettered: nothing to redrive
        try:
            letter = DeadLetter.decode(obj.body, job_id)
            if letter.quarantined:
                raise DecodeError("it holds foreign bytes quarantined as found, not a job")
            check_carried(letter.payload)  # pailq 0.1.1's letters may hold NaN
        except (DecodeError, PayloadError) as exc:
            if named:
                raise DecodeError(
                    f"dead letter {job_id} is unreadable as a job and cannot be redriven: {exc} "
                    "(pail dlq show prints its bytes)"
                ) from None
            log.warning("redrive: passing by dead letter %s: %s", job_id, exc)
            return False
        outcome = redrive.redrive(self._store, keys, job_id, obj, stats=self.write_stats)
        if not outcome.done:
            log.info("job %s not redriven: %s", job_id, outcome.reason)
        return outcome.done


def _checked_payload(payload: Any) -> Any:
    from pail import jsonsafe

    jsonsafe.check_value(payload, "payload")
    return payload


def _redrivable(job_id: str) -> bool:
    """Whether a listed letter's id can be sent back: one the protocol can hold as a job's id.

    A letter under ``dlq/!{due}-{id}`` (a quarantined foreign entry, or
    pailq 0.1.1's run of a delayed one) would be sent back to
    ``queue/!{due}-{id}``: the delayed entry of job ``{id}``, not its own.
    """
    try:
        validate_job_id(job_id)
    except ConfigurationError as exc:
        log.warning("redrive: passing by dead letter %s: %s", job_id, exc)
        return False
    return True


MAX_PAGE_LIMIT = 10_000
"""The most jobs one ``jobs()`` page may ask for (each may cost a GET)."""


def _batch_tags(
    tags: Mapping[str, str] | Sequence[Mapping[str, str] | None] | None, count: int
) -> list[Tags]:
    """``enqueue_many``'s tags, one checked mapping per payload (``ConfigurationError`` if not)."""
    if tags is None or isinstance(tags, Mapping):
        return [validate_tags(tags)] * count
    if not isinstance(tags, list | tuple) or len(tags) != count:
        raise ConfigurationError(
            f"enqueue_many: tags must be one mapping or one per payload ({count}), got {tags!r:.80}"
        )
    return [validate_tags(item) for item in tags]


def _store_of(bucket: str | Store, client: S3Client | None) -> Store:
    if isinstance(bucket, str):
        if client is None:
            raise ConfigurationError(
                f"Pail({bucket!r}) needs a boto3 S3 client: Pail({bucket!r}, boto3.client('s3')), "
                f"or Pail.connect({bucket!r}) to build one"
            )
        return store_for(bucket, client)
    if client is not None:
        raise ConfigurationError("Pail(store, client): a Store brings its own client; pass one")
    return bucket


def _validate_job_timeout(job_timeout: float | None) -> None:
    if job_timeout is not None:
        validate_seconds("job_timeout", job_timeout, above_minimum=True)


def _ids(ids: Sequence[str] | None) -> tuple[str, ...]:
    """Job ids a caller named (``after``, ``then``), each checked against the key grammar."""
    if isinstance(ids, str):
        raise ConfigurationError("name jobs as a list of ids, not one string")
    return tuple(validate_job_id(job_id) for job_id in ids or ())
