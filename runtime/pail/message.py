"""A claimed job, as the raw ``claim`` API hands it out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pail.clock import Clock
from pail.codec import ErrorInfo
from pail.errors import LeaseLostError, PayloadError
from pail.heartbeat import Heartbeat
from pail.jsonsafe import check_value
from pail.keys import Keys
from pail.protocol import cancel, settle
from pail.protocol import dependencies as graph
from pail.protocol.lease import Lease
from pail.protocol.overlap import SEQUENTIAL, Overlap
from pail.protocol.transitions import Ending
from pail.protocol.writes import WriteStats
from pail.store.base import Store
from pail.threads import SYSTEM_THREADS, ThreadFactory

log = logging.getLogger("pail")


class Message:
    """One claimed job. Its lease is renewed in the background until it is settled.

    Settle it exactly once, with ``complete(result)`` or ``fail(error)``::

        message = pail.claim()
        if message is not None:
            try:
                message.complete(build_report(message.payload))
            except Exception as exc:
                message.fail(exc)
    """

    def __init__(
        self,
        store: Store,
        keys: Keys,
        lease: Lease,
        policy: settle.Policy,
        clock: Clock,
        stats: WriteStats | None = None,
        *,
        overlap: Overlap = SEQUENTIAL,
        read_ahead: Callable[[], None] | None = None,
        threads: ThreadFactory = SYSTEM_THREADS,
    ) -> None:
        """``threads`` runs the heartbeat (``pail.threads``; the simulation passes its own)."""
        self._store = store
        self._overlap = overlap
        self._read_ahead = read_ahead
        self._keys = keys
        self._lease = lease
        self._policy = policy
        self._stats = stats
        self._settled = False
        self._cancelled: bool | None = None
        self._clock = clock
        self._dependencies: Mapping[str, Any] | None = None
        self._fan_outs = 0
        self._heartbeat = Heartbeat(
            lease, policy.visibility_timeout / 3, clock, owner=self, threads=threads
        ).start()

    @property
    def id(self) -> str:
        return self._lease.job_id

    @property
    def payload(self) -> Any:
        return self._lease.record.payload

    @property
    def trace(self) -> dict[str, str]:
        """The producer's W3C trace context (``pail.tracing``); empty when it was not traced."""
        return self._lease.record.trace

    @property
    def destination(self) -> str:
        """The bucket and queue, as the job's spans name them (``pail.tracing.destination``)."""
        return f"{self._store.bucket}/{self._keys.namespace or '(default)'}"

    @property
    def attempt(self) -> int:
        """This attempt's number: 1 for the first run, 2 for the first retry, ..."""
        return self._lease.record.attempt

    @property
    def lease_lost(self) -> bool:
        """True once a renewal found that another worker or the reaper took the job."""
        return self._lease.lost

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled; learnt at a heartbeat (its renewal fails).

        A cooperative handler checks it (``current_job().message.cancelled``)
        and stops; whatever it returns is not recorded. Costs one HEAD, once,
        after the lease was lost.
        """
        if self._cancelled is None and self._lease.lost:
            self._cancelled = cancel.was_cancelled(self._store, self._keys, self.id)
        return bool(self._cancelled)

    @property
    def settled(self) -> bool:
        return self._settled

    @property
    def dependencies(self) -> Mapping[str, Any]:
        """The results of the jobs this one waited for (``enqueue(after=...)``), by id.

        Read once, on first use: one GET per dependency. Empty for a job that
        waited for nothing. ``docs/dependencies.md``.
        """
        if self._dependencies is None:
            self._dependencies = graph.as_mapping(
                graph.results(self._store, graph.unpinned(self._keys), self._lease.record.after)
            )
        return self._dependencies

    def fan_out(
        self, children: Sequence[Any], *, then: Any, on_failure: str = graph.DEAD_LETTER
    ) -> graph.Flow:
        """Enqueue ``children`` and ``then``, which runs once all of them and this job succeeded.

        The ids come from this job's id, its life (a redrive begins another)
        and the number of this call in the handler, so a retry of this job
        makes the very same writes: a crash anywhere in them is repaired by
        the next attempt, and a job that dies instead ends ``then``
        (``on_failure`` as in ``Pail.enqueue``).
        """
        number, self._fan_outs = self._fan_outs, self._fan_outs + 1
        flow = graph.fan_out_ids(self.id, number, len(children), self._lease.record.redriven)
        return graph.fan_out(
            self._store,
            graph.flow_keys(self._keys, self.id),
            self._lease,
            flow,
            children,
            then,
            now=self._clock.now(),
            on_failure=on_failure,
            stats=self._stats,
        )

    @property
    def lease(self) -> Lease:
        return self._lease

    def progress(self, value: Any) -> None:
        """Report progress; it is written with the next lease renewal, at no extra request.

        ``value`` must be strict JSON (no NaN, nested at most 100 levels): a
        status page reads it. Anything else raises ``PayloadError`` here, at
        once, and the previous progress stands; the heartbeat never sees it.
        """
        check_value(value, "progress")
        self._lease.set_progress(value)

    def complete(self, result: Any = None) -> bool:
        """Store ``result`` as the job's result; True if it is the job's result now.

        False means the lease was lost (another worker owns the job now) or
        another attempt had already finished the job. A result that is not
        JSON-serialisable fails this attempt, with that error recorded, and
        raises ``PayloadError``. It returns once the result is written; the
        lease's removal may still be under way (``Pail.flush`` waits for it).
        """
        self._begin_settling()
        try:
            return settle.complete(
                self._store,
                self._keys,
                self._lease,
                result,
                self._policy,
                self._stats,
                overlap=self._overlap,
                read_ahead=self._read_ahead,
            )
        except LeaseLostError as exc:
            settle.settle_quietly("complete", self.id, exc)
            return False
        except PayloadError as exc:
            self._settled = False
            self.fail(exc)
            raise

    def fail(self, error: BaseException | str | None = None) -> Ending | None:
        """Fail this attempt. The job is retried, or dead-lettered if no retries are left.

        Returns how the job ended (requeued or dead-lettered), or None if the
        lease was lost and another worker owns the job now.
        """
        self._begin_settling()
        info = _error_info(error)
        try:
            return settle.fail(
                self._store, self._keys, self._lease, info, self._policy, self._stats
            )
        except LeaseLostError as exc:
            settle.settle_quietly("fail", self.id, exc)
            return None

    def release(self, reason: str, *, started: bool = True) -> Ending | None:
        """Give the job back to the queue now, before its lease would expire.

        Used when this worker must stop (a Lambda near its timeout, a SIGTERM):
        the job is claimable again at once, never after a retry backoff.
        ``started`` says whether the handler began this attempt:

        * ``started=False`` (claimed, but too late to run it): the attempt is
          not spent; the job goes back with the attempts and last error it had.
        * ``started=True`` (the default): the attempt counts, with ``reason``
          recorded as the job's last error (type ``LeaseReleased``), so a job
          that never fits in the time available dead-letters once its retries
          are spent instead of cycling forever.

        Returns how the job ended, or None if the lease was lost.
        """
        self._begin_settling()
        info = ErrorInfo.from_exception(_ReleasedError(reason))
        try:
            return settle.release(
                self._store,
                self._keys,
                self._lease,
                info,
                self._policy,
                started=started,
                stats=self._stats,
            )
        except LeaseLostError as exc:
            settle.settle_quietly("release", self.id, exc)
            return None

    def _begin_settling(self) -> None:
        if self._settled:
            raise RuntimeError(f"job {self.id} was already completed or failed")
        self._settled = True
        self._heartbeat.stop()


class _ReleasedError(Exception):
    """Recorded on a job whose worker gave its lease up before finishing."""


_ReleasedError.__name__ = "LeaseReleased"


def _error_info(error: BaseException | str | None) -> ErrorInfo:
    if isinstance(error, BaseException):
        return ErrorInfo.from_exception(error)
    if isinstance(error, str):
        return ErrorInfo("Failed", error)
    return ErrorInfo("Failed", "the attempt was failed without an error")
