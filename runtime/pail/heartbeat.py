"""The background thread that keeps a lease alive while its handler runs."""

from __future__ import annotations

import logging
import weakref

from pail.clock import Clock
from pail.errors import LeaseLostError, PailError
from pail.protocol.lease import Lease
from pail.threads import SYSTEM_THREADS, Started, ThreadFactory

log = logging.getLogger("pail")


class Heartbeat:
    """Renews ``lease`` every ``interval`` seconds until stopped or the lease is lost.

    A renewal that fails transiently (a network error, a 5xx past botocore's
    retries) is retried at the next tick; the job keeps running. A renewal
    that finds the lease taken sets ``lost`` and stops.
    """

    def __init__(
        self,
        lease: Lease,
        interval: float,
        clock: Clock,
        owner: object | None = None,
        *,
        threads: ThreadFactory = SYSTEM_THREADS,
    ) -> None:
        self._lease = lease
        # A weak reference to whoever holds the job (a Message): if user code
        # drops it without settling, renewals stop and the lease can expire,
        # instead of keeping the job "running" for the life of the process.
        self._owner = weakref.ref(owner) if owner is not None else None
        self._interval = interval
        self._clock = clock
        # Its thread and events come from ``threads`` (``pail.threads``: the simulation's).
        self._threads = threads
        self._stop = threads.event()
        self.lost = threads.event()
        self.failures = 0
        self._thread: Started | None = None

    def start(self) -> Heartbeat:
        self._thread = self._threads.start(self._run, f"pail-heartbeat-{self._lease.job_id}")
        return self

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and self._threads.current() is not thread:
            thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._clock.sleep(self._interval, wake=self._stop)
            if self._stop.is_set() or (self._owner is not None and self._owner() is None):
                return
            try:
                self._lease.renew()
            except LeaseLostError as exc:
                log.warning("job %s: lease lost: %s", self._lease.job_id, exc)
                self.lost.set()
                return
            except PailError as exc:
                self.failures += 1
                log.warning("job %s: heartbeat failed, will retry: %s", self._lease.job_id, exc)
