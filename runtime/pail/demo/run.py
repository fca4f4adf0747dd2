"""The demo's orchestration: the server, the bucket, the batch, the fleet, the reaper, the end.

``run_demo`` runs one demo end to end (``pail demo`` calls it) and stops
everything it started, on success, failure, Ctrl-C or SIGTERM. ``Demo``
holds one run's steps: enqueue the batch, watch the queue while reaping on
a schedule and killing the long job's worker, then account for every job.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pail.codec import LeaseRecord
from pail.demo.display import Display, Snapshot, make_display
from pail.demo.fleet import Fleet, WorkerSpec
from pail.demo.jobs import Batch, build_batch, ledger_attempts
from pail.demo.summary import DemoReport, Reclaim, hold_server, render_summary
from pail.errors import DecodeError, PailError
from pail.keys import DLQ, DONE
from pail.local import LocalS3, create_buckets
from pail.output import Output
from pail.status import JobState
from pail.store.listing import pages

DEMO_BUCKET = "pail-demo"


class DemoError(PailError):
    """The demo could not finish (or finished with jobs unaccounted for)."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """How big, how fast, and how interactive the demo is."""

    jobs: int = 200
    workers: int = 4
    visibility_timeout: float = 3.0
    max_retries: int = 3
    port: int | None = None
    seed: int = 7
    flaky: int = 5
    reap_every: float = 1.0
    # Kill the long job's worker once its lease has been held this long.
    kill_after: float = 0.5
    deadline: float = 120.0
    hold: bool = False
    # Open the killed job's status page in a browser (implies hold).
    open_status: bool = False


class Demo:
    """One run of the demo against a server that is already up."""

    def __init__(
        self,
        options: DemoOptions,
        server: LocalS3,
        display: Display,
        spec: WorkerSpec,
        origin: float,
    ) -> None:
        self.options = options
        self.ledger = Path(spec.ledger)
        self.server = server
        self.display = display
        self.batch: Batch = build_batch(options.jobs, flaky=options.flaky, seed=options.seed)
        self.ids: list[str] = []
        self.reclaims: list[Reclaim] = []
        self.other_reclaims: list[str] = []
        self._origin = origin
        self._started = origin
        self._finished = origin
        self._long_seen: float | None = None
        self._failures_seen = 0
        self._ledger_seen: dict[str, int] = {}
        self.pail = spec.connect()

    # -- the steps ------------------------------------------------------------

    def create_bucket(self) -> None:
        create_buckets(self.server.endpoint_url, [DEMO_BUCKET])

    def enqueue(self) -> None:
        """Enqueue the batch: the long job first, then the rest over a few connections."""
        payloads = self.batch.payloads
        first = self.pail.enqueue(payloads[0])
        with ThreadPoolExecutor(max_workers=8) as pool:
            rest = list(pool.map(self.pail.enqueue, payloads[1:]))
        self.ids = [first, *rest]

    def elapsed(self) -> float:
        """Seconds since the demo started (the stamp on every line)."""
        return time.monotonic() - self._origin

    def run(self, fleet: Fleet) -> None:
        """Watch the queue until every job has ended, reaping and killing on schedule."""
        options = self.options
        self._started = time.monotonic()
        next_reap = self._started + options.reap_every
        total = len(self.ids)
        while True:
            now = time.monotonic()
            if now - self._started > options.deadline:
                raise DemoError(
                    f"the jobs did not all finish within {options.deadline:g} s "
                    "(is the machine very busy? see the workers' logs with --debug)"
                )
            if now >= next_reap:
                self.reap()
                next_reap = now + options.reap_every
            if not self.reclaims:
                self.maybe_kill(fleet)
            else:
                self.follow_reclaimed()
            stats = self.pail.stats()
            self.report_failures(stats.failed)
            self.report_flaky()
            finished = stats.done + stats.failed
            working = time.monotonic() - self._started
            self.display.update(
                Snapshot(
                    self.elapsed(),
                    total,
                    stats.pending,
                    stats.running,
                    stats.done,
                    stats.failed,
                    fleet.alive(),
                    finished / working if working > 0 else 0.0,
                )
            )
            if finished >= total and stats.pending == stats.running == 0:
                self._finished = time.monotonic()
                return
            time.sleep(0.5)  # pacing the display; every check above reads the bucket afresh

    # -- what happens along the way --------------------------------------------

    def event(self, text: str, style: str = "") -> None:
        self.display.event(self.elapsed(), text, style)

    def reap(self) -> None:
        report = self.pail.reap()
        for job_id in report.requeued_ids:
            reclaim = next((r for r in self.reclaims if r.job_id == job_id), None)
            if reclaim is not None and reclaim.reclaimed_at is None:
                reclaim.reclaimed_at = self.elapsed()
                waited = reclaim.reclaimed_at - reclaim.killed_at
                self.event(
                    f"reaper: lease of job {job_id} expired {waited:.1f} s after its worker "
                    f"(pid {reclaim.pid}) died; job requeued for attempt 2",
                    "bold magenta",
                )
            else:
                self.other_reclaims.append(job_id)
                self.event(f"reaper: reclaimed the expired lease of job {job_id}", "magenta")
        for job_id in report.dead_lettered_ids:
            self.event(f"reaper: job {job_id} had no retries left: dead-lettered", "red")

    def maybe_kill(self, fleet: Fleet) -> None:
        """SIGKILL the worker holding the long job once it has run for ``kill_after`` seconds."""
        long_id = self.ids[self.batch.long]
        obj = self.pail.store.get(self.pail.keys.run(long_id))
        if obj is None:
            return
        try:
            record = LeaseRecord.decode(obj.body, long_id)
        except DecodeError:
            return
        _, _, pid_text = record.owner.rpartition(":")
        if record.attempt != 1 or not pid_text.isdigit() or int(pid_text) not in fleet.pids:
            return
        if self._long_seen is None:
            self._long_seen = self.elapsed()
            self.event(
                f"worker pid {pid_text} started the long job {long_id} "
                f"({record.payload.get('scenario')} simulation, ~5 s)"
            )
            return
        if self.elapsed() - self._long_seen < self.options.kill_after:
            return
        pid = int(pid_text)
        fleet.kill(pid)
        self.reclaims.append(Reclaim(long_id, pid, self.elapsed()))
        self.event(
            f"killed worker pid {pid} with SIGKILL in the middle of job {long_id}: "
            "its lease will expire unrenewed",
            "bold yellow",
        )

    def follow_reclaimed(self) -> None:
        for reclaim in self.reclaims:
            if reclaim.reclaimed_at is None or reclaim.finished_attempt is not None:
                continue
            status = self.pail.status(reclaim.job_id)
            if status is not None and status.state is JobState.DONE:
                reclaim.finished_attempt = status.attempts
                self.event(
                    f"job {reclaim.job_id} finished on attempt {status.attempts}, "
                    "on another worker: nothing lost",
                    "bold green",
                )

    def report_failures(self, failed: int) -> None:
        if failed <= self._failures_seen:
            return
        self._failures_seen = failed
        for letter in self.pail.dead_letters():
            self.event(
                f"job {letter.job_id} dead-lettered after {letter.attempts} attempts: {letter.error}",
                "bold red",
            )

    def report_flaky(self) -> None:
        attempts = ledger_attempts(self.ledger)
        for name, count in sorted(attempts.items()):
            for attempt in range(self._ledger_seen.get(name, 0) + 1, count + 1):
                if attempt <= 2:
                    self.event(
                        f"report {name}: attempt {attempt} failed (warehouse replica timed out); "
                        "it goes back to the queue for a retry",
                        "yellow",
                    )
                else:
                    self.event(f"report {name}: attempt {attempt} is running", "green")
            self._ledger_seen[name] = count

    # -- the end ------------------------------------------------------------

    def report(self) -> DemoReport:
        done_ids = self._ids_under(DONE)
        dead_ids = self._ids_under(DLQ)
        done_ids -= dead_ids  # a dead job keeps a null marker under done/
        enqueued = set(self.ids)
        long_id = self.ids[self.batch.long]
        recovered: dict[str, int] = {}
        for index in self.batch.flaky:
            status = self.pail.status(self.ids[index])
            if status is not None and status.state is JobState.DONE and status.attempts > 1:
                recovered[str(self.batch.payloads[index]["report_id"])] = status.attempts
        return DemoReport(
            endpoint_url=self.server.endpoint_url,
            bucket=DEMO_BUCKET,
            enqueued=len(self.ids),
            done=len(done_ids & enqueued),
            failed=len(dead_ids & enqueued),
            missing=sorted(enqueued - done_ids - dead_ids),
            unknown=sorted((done_ids | dead_ids) - enqueued),
            elapsed=self.elapsed(),
            processing=self._finished - self._started,
            flaky=len(self.batch.flaky),
            workers=self.options.workers,
            visibility_timeout=self.options.visibility_timeout,
            max_retries=self.options.max_retries,
            reclaims=self.reclaims,
            other_reclaims=self.other_reclaims,
            recovered=recovered,
            dead_letters=self.pail.dead_letters(),
            result_job=long_id,
            result_url=self.pail.result_url(long_id),
            result=self.pail.result(long_id),
        )

    def _ids_under(self, state: str) -> set[str]:
        keys = self.pail.keys
        listing = pages(self.pail.store, keys.prefix(state))
        return {keys.job_id(item.key) for page in listing for item in page.items}


@contextmanager
def _interrupted_by_ctrl_c_and_sigterm() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM raise ``KeyboardInterrupt`` while the demo runs.

    Python turns SIGINT into ``KeyboardInterrupt`` only "if the parent process
    has not changed it": a demo started by a process that ignores SIGINT (a
    non-interactive shell's background job, some CI runners) inherits the
    ignore, so a Ctrl-C or ``kill -INT`` did nothing, the demo ran to its end
    and exited 0 instead of 130. Both signals are installed here, explicitly,
    so the demo always stops, cleans up and exits 130.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = {
            signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
            signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt),
        }
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_demo(options: DemoOptions, out: Output) -> DemoReport:
    """Run the demo end to end and render its summary; everything started is stopped."""
    try:
        return _run(options, out)
    except KeyboardInterrupt:
        out.note("stopped the demo's workers and its server: nothing is left running")
        raise


def _run(options: DemoOptions, out: Output) -> DemoReport:
    origin = time.monotonic()
    display_console = out.errors if out.json_mode else out.console
    with ExitStack() as stack:
        stack.enter_context(_interrupted_by_ctrl_c_and_sigterm())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pail-demo-")))
        out.note("starting the embedded S3 server ...")
        server = stack.enter_context(LocalS3(options.port))
        display = make_display(display_console)
        stack.callback(display.close)
        spec = WorkerSpec(
            bucket=DEMO_BUCKET,
            endpoint=server.connect_kwargs(),
            visibility_timeout=options.visibility_timeout,
            max_retries=options.max_retries,
            ledger=str(workdir / "ledger"),
            log_dir=str(workdir),
        )
        demo = Demo(options, server, display, spec, origin)
        demo.create_bucket()
        fleet = Fleet(spec, options.workers)
        with fleet:
            demo.event(
                f"server up at {server.endpoint_url}, bucket {DEMO_BUCKET}; "
                f"starting {options.workers} worker processes "
                f"(visibility timeout {options.visibility_timeout:g} s, "
                f"max retries {options.max_retries})"
            )
            demo.enqueue()
            demo.event(
                f"enqueued {len(demo.ids)} jobs: reports and simulations, "
                f"{options.flaky} with a flaky warehouse replica, 1 poison, 1 long"
            )
            try:
                demo.run(fleet)
            except DemoError:
                if out.debug:
                    out.errors.print(fleet.log_tail(), markup=False)
                raise
        display.close()
        report = demo.report()
        render_summary(out, report, held=options.hold)
        if not report.accounted:
            raise DemoError(
                f"{len(report.missing)} job(s) unaccounted for: {', '.join(report.missing[:5])}"
            )
        if options.hold:
            status_pages(out, report, spec, stack, open_browser=options.open_status)
            hold_server(out, report)
        return report


def status_pages(
    out: Output, report: DemoReport, spec: WorkerSpec, stack: ExitStack, *, open_browser: bool
) -> None:
    """Serve the browser status page for the killed worker's job and the dead letter.

    The page polls the local server straight from the browser: ``pail.local``
    lets pages served on this machine GET and HEAD, as the PailQueue
    construct's CORS rule lets a page on AWS.
    """
    from pail.status_page import serve_status_page

    pail = spec.connect()
    jobs = [("the job whose worker was killed", report.result_job)]
    jobs += [("the dead letter", letter.job_id) for letter in report.dead_letters[:1]]
    out.print()
    out.print("[bold]Status pages[/] (open them in a browser while the server runs):")
    urls = []
    for label, job_id in jobs:
        url, stop = serve_status_page(pail, job_id)
        stack.callback(stop)
        urls.append(url)
        out.line(f"  {label}: {url}")
    if open_browser and urls:
        out.open_link(urls[0])
