"""Process chaos on the real local S3 server: kill workers, break the network, then audit.

``run_chaos`` enqueues the jobs, starts worker OS processes (``worker_main``:
``Pail.work`` through a ``FaultProxy``), and until every job is terminal it
SIGKILLs workers (restarting each at once) and runs ``reap()`` on a schedule,
also through the proxy. Then the network heals, the reaper runs until nothing
is left in ``queue/`` or ``run/``, and the audit reads everything back through
a direct client.

Kills follow progress, not the wall clock, so a run proves the same thing on
an idle and on a loaded machine: a kill is due after every
``kill_after_starts`` handler starts (read from the workers' record), and only
a worker that has started a job since it was (re)started may be killed. A slow
machine slows the kills down with the work, instead of killing workers before
they finish starting (a run on a loaded 2-core machine once made 171 kills
and drained 100 of 300 jobs in 128 s that way). The audit:

* **lost:** enqueued jobs without a terminal state (must be 0);
* **stuck:** objects left in ``queue/`` or ``run/`` once quiet (must be 0);
* **results changed:** sampled results re-read at the end (must be 0);
* **executions** (``tests.chaos.audit``): every handler start and end is
  recorded with the lease it ran under; a run that started while an earlier
  run's lease of the job was surely live, or without a lease, is a violation,
  and every other run after a job's first is a duplicate explained by a real
  SIGKILL of the earlier run before it ended (the runner records each kill
  with its time; the fleet's stop at the end is no kill) or by the earlier
  lease's expiry. Violations must be 0; ``known_bad`` adds a worker that
  breaks the protocol, which must show violations.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pail import Pail
from pail.codec import decode_result
from pail.errors import PailError, StorageError
from pail.keys import DLQ, DONE, QUEUE, RUN
from pail.local import LocalS3
from tests.chaos.audit import audit, complete_lines, read_executions
from tests.chaos.proxy import FaultProxy
from tests.chaos.worker_main import KNOWN_BAD
from tests.servers import make_s3_client
from tests.support.queues import connect_to, local_kwargs

ROOT = Path(__file__).resolve().parents[2]
TICK = 0.05


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """The CI variant by default: 150 jobs, 4 workers, a kill every 8 job starts, 5% faults."""

    jobs: int = 150
    """150 (300 until 2026-12-03): 14-16 real SIGKILLs and 20-30 faults of each kind a run;
    what the audit proves does not grow with the count (``scripts/chaos`` runs 2,000)."""
    workers: int = 4
    kill_after_starts: int = 8
    fault_rate: float = 0.05
    visibility_timeout: float = 1.5
    max_retries: int = 10
    reap_every: float = 1.0
    work_seconds: float = 0.2
    deadline: float = 600.0
    """A hard bound on the drain; the run fails sooner if nothing progresses for ``stall_limit``."""
    stall_limit: float = 60.0
    quiet_deadline: float = 20.0
    sample: int = 40
    seed: int = 0
    known_bad: str | None = None
    """One more worker, breaking the protocol (``worker_main.KNOWN_BAD``): the audit must catch it."""
    worker_args: tuple[str, ...] = ()
    """More arguments of every worker process (``fan_in``: ``--flow``)."""


@dataclass
class ChaosReport:
    """The figures and the findings of one run."""

    jobs: int = 0
    enqueue_errors: int = 0
    kills: int = 0
    kill_after_starts: int = 0
    reaper_passes: int = 0
    executions: int = 0
    jobs_run: int = 0
    started_expired: int = 0
    duplicates: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    violation_kinds: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    done: int = 0
    dead: int = 0
    lost: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    sampled: int = 0
    drained_in: float = 0.0
    seconds: float = 0.0
    timed_out: bool = False

    def summary(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()) if k != "requests")
        return (
            f"{self.jobs} jobs ({self.done} done, {self.dead} dead-lettered) drained in "
            f"{self.drained_in:.1f} s, {self.seconds:.1f} s in all\n"
            f"  kills {self.kills} (each after {self.kill_after_starts} handler starts, of a "
            f"worker that had started one), reaper passes {self.reaper_passes}, enqueue "
            f"errors {self.enqueue_errors}\n"
            f"  requests through the proxy {self.faults['requests']}, faults injected: {faults}\n"
            f"  executions {self.executions} of {self.jobs_run} jobs, duplicates explained "
            f"{sum(self.duplicates.values())} ({dict(self.duplicates)}), violations "
            f"{len(self.violations)} ({dict(self.violation_kinds)}), started with the lease "
            f"already run out {self.started_expired}\n"
            f"  lost {len(self.lost)}, stuck {len(self.stuck)}, results changed "
            f"{len(self.changed)} of {self.sampled} sampled"
            + ("\n  STOPPED PROGRESSING before every job was terminal" if self.timed_out else "")
        )


class _Forked:
    """A worker the zygote forked (not this process's child): ``Popen``'s ``pid``, ``args``,
    ``poll``, ``send_signal`` and ``wait``, through a pidfd (no pid can be reused under it)."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # it has already ended (and been reaped)
            self._fd = None

    def _ended(self, timeout: float | None) -> bool:
        if self._fd is not None and select.select([self._fd], [], [], timeout)[0]:
            os.close(self._fd)  # readable: the process has ended
            self._fd = None
        return self._fd is None

    def poll(self) -> int | None:
        """None while it runs (its exit status is the zygote's to reap, so 0 once it ended)."""
        return 0 if self._ended(0) else None

    def send_signal(self, signum: int) -> None:
        if self._fd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signum)

    def wait(self) -> int:
        """Until the process has ended."""
        self._ended(None)
        return 0


class _Fleet:
    """The worker processes: start, kill, restart, stop.

    Workers are forked by one zygote process (``worker_main --zygote``) that imported
    pail and boto3 once; a (re)started worker is a new process all the same.
    """

    def __init__(self, config: ChaosConfig, bucket: str, endpoint: str, record: Path) -> None:
        self._command = [
            sys.executable,
            "-m",
            "tests.chaos.worker_main",
            "--bucket",
            bucket,
            "--endpoint",
            endpoint,
            "--record",
            str(record),
            "--visibility-timeout",
            str(config.visibility_timeout),
            "--max-retries",
            str(config.max_retries),
            "--work-seconds",
            str(config.work_seconds),
            *config.worker_args,
        ]
        self._log_path = record.parent / "workers.log"
        self._log = self._log_path.open("ab")
        self._record = record
        self._read = 0
        self._zygote = subprocess.Popen(
            [*self._command[:3], "--zygote"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self.processes: list[_Forked] = []
        if config.known_bad:
            # The known-bad worker first, and the good ones only once it says it is up:
            # every job is still pending then, however slowly the machine starts processes.
            ready = record.parent / "known-bad.ready"
            bad = [*self._command, "--known-bad", config.known_bad, "--ready", str(ready)]
            self.processes.append(self._start(bad))
            self._wait_ready(self.processes[0], ready, config.stall_limit)
        self.processes += [self._start() for _ in range(config.workers)]
        self.killed: dict[int, float] = {}
        """Pid -> when it was surely dead after a SIGKILL: the real kills only, not the stop."""
        self.working: set[int] = set()
        """Pids that have started a job: the only ones a kill may hit."""
        self.starts = 0

    def _start(self, command: list[str] | None = None) -> _Forked:
        args = command or self._command
        assert self._zygote.stdin is not None and self._zygote.stdout is not None
        request = json.dumps([args[3:], str(self._log_path)]) + "\n"
        try:
            self._zygote.stdin.write(request.encode())
            self._zygote.stdin.flush()
            answer = self._zygote.stdout.readline()
        except BrokenPipeError:
            answer = b""
        if not answer.strip():
            log = self._log_path.read_text(errors="replace")
            raise RuntimeError(f"the chaos workers' zygote exited: {log[-2000:]}")
        return _Forked(int(answer), args)

    def _wait_ready(self, process: _Forked, ready: Path, limit: float) -> None:
        """Until ``process`` created ``ready``; fails if it exits first or takes ``limit`` seconds."""
        deadline = time.monotonic() + limit
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = (self._record.parent / "workers.log").read_text(errors="replace")
                raise RuntimeError(f"the known-bad worker did not start: {log[-2000:]}")
            time.sleep(TICK)  # polling for the file its start creates

    def progress(self) -> int:
        """Read the record's new lines; the number of handler starts so far."""
        if not self._record.exists():
            return self.starts
        with self._record.open("rb") as lines:
            lines.seek(self._read)
            chunk = lines.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
        self._read += len(complete)
        for execution in read_executions(complete.decode().splitlines()):
            self.starts += 1
            self.working.add(execution.pid)
        return self.starts

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL a worker that has started a job, and restart it; False if none has yet."""
        eligible = [i for i, p in enumerate(self.processes) if p.pid in self.working]
        if not eligible:
            return False
        index = rng.choice(eligible)
        process = self.processes[index]
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.killed[process.pid] = time.monotonic()
        self.processes[index] = self._start(process.args)
        return True

    def kill_pid(self, pid: int) -> bool:
        """SIGKILL the worker ``pid`` (one that has just started a chosen job) and restart it."""
        index = next((i for i, p in enumerate(self.processes) if p.pid == pid), None)
        if index is None or self.processes[index].poll() is not None:
            return False
        process = self.processes[index]
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.killed[process.pid] = time.monotonic()
        self.processes[index] = self._start(process.args)
        return True

    def stop(self) -> None:
        """End every worker; these are not kills (the audit counts only ``kill_one``'s)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()
        if self._zygote.stdin is not None:
            self._zygote.stdin.close()  # its end of input: it exits
        try:
            self._zygote.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._zygote.kill()
            self._zygote.wait()
        if self._zygote.stdout is not None:
            self._zygote.stdout.close()
        self._log.close()


def run_chaos(server: LocalS3, bucket: str, workdir: Path, config: ChaosConfig) -> ChaosReport:
    """Run the chaos described in the module docstring; see ``ChaosReport`` for what it finds."""
    began = time.monotonic()
    report = ChaosReport(kill_after_starts=config.kill_after_starts)
    rng = random.Random(config.seed)
    record = workdir / "executions.log"
    direct = _connect(bucket, server.endpoint_url, config)
    with FaultProxy(server.port, fault_rate=config.fault_rate, seed=config.seed) as proxy:
        faulty = _connect(bucket, proxy.endpoint_url, config)
        ids = _enqueue(faulty, config.jobs, report)
        fleet = _Fleet(config, bucket, proxy.endpoint_url, record)
        samples: dict[str, tuple[str, bytes]] = {}
        try:
            report.timed_out = not _drain(config, fleet, faulty, direct, ids, samples, report, rng)
        finally:
            fleet.stop()
        report.drained_in = time.monotonic() - began
        proxy.fault_rate = 0.0
        report.faults = Counter(proxy.counts)
    _quiet_down(direct, config, report)
    _audit(direct, ids, samples, record, fleet.killed, report)
    report.seconds = time.monotonic() - began
    return report


def _connect(bucket: str, endpoint: str, config: ChaosConfig) -> Pail:
    return connect_to(
        local_kwargs(endpoint),
        bucket,
        visibility_timeout=config.visibility_timeout,
        max_retries=config.max_retries,
    )


def _enqueue(pail: Pail, jobs: int, report: ChaosReport) -> dict[str, int]:
    """Enqueue ``jobs`` jobs through the proxy; an enqueue that fails is made again."""
    ids: dict[str, int] = {}
    call = 0
    while len(ids) < jobs:
        try:
            ids[pail.enqueue({"n": call})] = call
        except StorageError:
            report.enqueue_errors += 1
        call += 1
    report.jobs = len(ids)
    return ids


def _drain(
    config: ChaosConfig,
    fleet: _Fleet,
    faulty: Pail,
    direct: Pail,
    ids: dict[str, int],
    samples: dict[str, tuple[str, bytes]],
    report: ChaosReport,
    rng: random.Random,
) -> bool:
    """Kill, restart and reap until every enqueued job is terminal; False if it stops progressing.

    A loaded machine only makes the run slower: it fails when no job has
    started or ended for ``stall_limit`` seconds (or at the hard ``deadline``).
    """
    start = time.monotonic()
    next_kill = config.kill_after_starts
    next_reap = start + config.reap_every
    next_check = start
    progress, progressed_at = (-1, -1), start
    while time.monotonic() - start < config.deadline:
        now = time.monotonic()
        if now - progressed_at > config.stall_limit:
            return False
        if fleet.progress() >= next_kill and fleet.kill_one(rng):
            report.kills += 1
            next_kill = fleet.starts + config.kill_after_starts
        if now >= next_reap:
            try:
                faulty.reap()
                report.reaper_passes += 1
            except StorageError:
                pass  # a reap that met too many faults: the next one goes on
            next_reap = now + config.reap_every
        if now >= next_check:
            finished = _terminal_ids(direct)
            _sample(direct, finished, samples, config.sample)
            if set(ids) <= finished:
                return True
            if (len(finished), fleet.starts) != progress:
                progress, progressed_at = (len(finished), fleet.starts), now
            next_check = now + 0.5
        time.sleep(TICK)  # the loop's tick: a due kill or reap waits at most this long
    return False


def _terminal_ids(pail: Pail) -> set[str]:
    return {pail.keys.job_id(info.key) for info in _listing(pail, DONE)}


def _listing(pail: Pail, state: str) -> list[Any]:
    items: list[Any] = []
    token: str | None = None
    while True:
        page = pail.store.list(pail.keys.prefix(state), continuation=token)
        items.extend(page.items)
        token = page.next_token
        if token is None:
            return items


def _sample(pail: Pail, finished: set[str], samples: dict[str, tuple[str, bytes]], n: int) -> None:
    """Read a few results as soon as they are visible, to compare with the end."""
    for job_id in sorted(finished - set(samples))[: max(0, n - len(samples))]:
        obj = pail.store.get(pail.keys.done(job_id))
        if obj is not None:
            samples[job_id] = (obj.etag, obj.body)


def _quiet_down(pail: Pail, config: ChaosConfig, report: ChaosReport) -> None:
    """Reap, with the network healed, until nothing is pending or running (or the deadline)."""
    deadline = time.monotonic() + config.quiet_deadline
    while time.monotonic() < deadline:
        if not _listing(pail, QUEUE) and not _listing(pail, RUN):
            return
        try:
            pail.reap()
            report.reaper_passes += 1
        except PailError:
            pass
        time.sleep(0.25)  # leases of killed workers expire on the server's clock


def _audit(
    pail: Pail,
    ids: dict[str, int],
    samples: dict[str, tuple[str, bytes]],
    record: Path,
    killed: dict[int, float],
    report: ChaosReport,
) -> None:
    report.stuck = sorted(info.key for state in (QUEUE, RUN) for info in _listing(pail, state))
    finished = _terminal_ids(pail)
    report.lost = sorted(set(ids) - finished)
    dead = {pail.keys.job_id(info.key) for info in _listing(pail, DLQ)}
    report.dead = len(dead & set(ids))
    report.done = len((finished - dead) & set(ids))
    for job_id, (etag, body) in samples.items():
        now = pail.store.get(pail.keys.done(job_id))
        if now is None or (now.etag, now.body) != (etag, body):
            report.changed.append(job_id)
    report.sampled = len(samples)
    winners = _winners(pail, finished, dead)
    found = audit(read_executions(complete_lines(record)), killed, winners)
    report.executions, report.jobs_run = found.executions, found.jobs_run
    report.started_expired = found.started_expired
    report.duplicates, report.violations = found.duplicates, found.violations
    report.violation_kinds = found.kinds


def _winners(pail: Pail, finished: set[str], dead: set[str]) -> dict[int, str | None]:
    """Enqueue call number -> the lease token of the run whose result counts (None if dead)."""
    winners: dict[int, str | None] = {}
    for letter in pail.dead_letters():
        if isinstance(letter.payload, dict):
            winners[int(letter.payload["n"])] = None
    for job_id in finished - dead:
        obj = pail.store.get(pail.keys.done(job_id))
        if obj is not None:
            result = decode_result(obj.body)
            winners[int(result["n"])] = result.get("lease")
    return winners


def main() -> int:
    """``scripts/chaos``: the larger variant (2,000 jobs by default) on its own server."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--kill-after-starts", type=int, default=8, help="a kill per this many handler starts"
    )
    parser.add_argument("--fault-rate", type=float, default=0.05)
    parser.add_argument("--deadline", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--known-bad", choices=KNOWN_BAD, help="add a worker that breaks the protocol"
    )
    args = parser.parse_args()
    config = ChaosConfig(
        jobs=args.jobs,
        workers=args.workers,
        kill_after_starts=args.kill_after_starts,
        fault_rate=args.fault_rate,
        deadline=args.deadline,
        quiet_deadline=60.0,
        seed=args.seed,
        known_bad=args.known_bad,
    )
    with LocalS3() as server, tempfile.TemporaryDirectory(prefix="pail-chaos-") as tmp:
        make_s3_client(server.connect_kwargs()).create_bucket(Bucket="chaos")
        report = run_chaos(server, "chaos", Path(tmp), config)
    print(report.summary())
    for line in report.violations[:20]:
        print(f"  violation: {line}")
    bad = report.lost or report.stuck or report.changed or report.violations or report.timed_out
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
