"""The workers' own reap pass: how a queue served by workers alone recovers a dead worker's job.

pailq 0.1.1 had no reaper: its claims reclaimed expired leases themselves,
throttled to one pass per ``Pail`` per visibility timeout, and a 0.1.1
deployment is workers and nothing else. pail keeps that promise with the same
shape: a ``Pail`` whose claims reclaim (the default; ``reclaim=False``,
``PAIL_RECLAIM=false`` or ``pail work --no-reclaim`` turn it off) runs one
pass of the reaper over the leases (``Reaper.reclaim_leases``, unchanged: the
same fence, the same bounded pages; not the schedules' ticks, which stay the
scheduled reaper's; but the waiting jobs' late edges, ``Reaper.run_dependencies``,
since only a pass promotes them) before a claim, **at most once per interval**, the
visibility timeout. Every other claim pays one clock read, so a claim stays O(1) in the
backlog and in the number of running jobs; the pass itself costs what a
reaper pass costs (one LIST of ``run/`` while it fits in a page, plus a GET,
a PUT and the transition's writes per expired lease; one LIST of ``wait/``,
plus a HEAD per unmet late edge whose dependency is not listed running).

The first claim of a ``Pail`` runs a pass (0.1.1 did too: a one-shot
``work_once`` process, a cron container, recovers the jobs of the one before
it), and so does any claim an interval after the last pass. A worker killed
at ``t`` leaves a lease that expires at ``t + timeout`` (plus a second of
clock resolution); a live worker's next pass finds it at most one interval
later, so the job is pending again by about ``t + 2 * timeout``, and an idle
worker's claims come at least every poll interval.

One ``Pail`` is one throttle, shared by its threads (a pass in flight makes
the others skip, never wait). ``work()``, ``pail work`` and the runner use
one ``Pail`` per process, so that is one pass per process per interval.
Measured (defaults: 30 s timeout, idle polls up to 20 s apart): an idle
worker runs 1.5 passes a minute (a pass at the first poll 30 s after the
last, so every 40 s), 1.5 LISTs of ``run/`` beside its 3.1 of ``queue/``;
16 busy workers, 2.0 passes per process a minute, 0.028 LIST per job at 19
jobs/s (``docs/upgrading.md``). A pass that fails
(S3 down) is logged and does not fail the claim; the next is due an interval
later, so a storage outage does not turn into a LIST per claim.

Deployments that run a scheduled reaper (the construct's reaper Lambda,
``pail reap --every``) may turn this off: the construct's worker Lambda and
Fargate task do, since a fresh process on every invocation or task would run
a pass each time, for leases its reaper already handles every minute.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from pail.errors import PailError

if TYPE_CHECKING:
    from pail.protocol.reaper import ReapReport

log = logging.getLogger("pail")


class Reclaimer:
    """Runs ``reap`` before a claim, at most once per ``interval`` seconds of ``monotonic``."""

    def __init__(
        self,
        reap: Callable[[], ReapReport],
        *,
        interval: float,
        monotonic: Callable[[], float],
        now: Callable[[], datetime],
    ) -> None:
        self._reap = reap
        self._interval = interval
        self._monotonic = monotonic
        self._now = now
        self._lock = threading.Lock()
        self._last: float | None = None
        self.last_reclaim: datetime | None = None
        """When the last pass started (wall clock), None before the first: pailq 0.1.1's name."""
        self.passes = 0
        """Passes started by this reclaimer (claims' and ``reclaim()``'s), for cost accounting."""

    @property
    def interval(self) -> float:
        """Seconds between two passes of the claims: the visibility timeout."""
        return self._interval

    def due(self) -> bool:
        """True when a claim now would run a pass (no request)."""
        last = self._last
        return last is None or self._monotonic() - last >= self._interval

    def before_claim(self) -> ReapReport | None:
        """A pass if one is due and none is in flight, else nothing; never raises a ``PailError``."""
        if not self.due() or not self._lock.acquire(blocking=False):
            return None
        try:
            if not self.due():  # another thread ran one meanwhile
                return None
            return self._pass(logged=True)
        finally:
            self._lock.release()

    def reclaim(self) -> ReapReport:
        """A pass now, whatever the throttle says (``Pail.reclaim``); its errors are raised."""
        with self._lock:
            report = self._pass(logged=False)
        assert report is not None
        return report

    def _pass(self, *, logged: bool) -> ReapReport | None:
        # The time is taken before the pass: a pass that fails still waits a
        # whole interval before the next, so an outage costs no LIST per claim.
        self._last = self._monotonic()
        self.last_reclaim = self._now()
        self.passes += 1
        if not logged:
            return self._reap()
        try:
            report = self._reap()
        except PailError as exc:
            log.warning("reclaim pass failed, next in %.0f s: %s", self._interval, exc)
            return None
        if report.requeued or report.dead_lettered or report.quarantined:
            log.info(
                "reclaim pass: %d expired lease(s) requeued, %d dead-lettered, %d quarantined",
                report.requeued,
                report.dead_lettered,
                report.quarantined,
            )
        return report
