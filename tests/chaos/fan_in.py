"""Process chaos on a fan-in: SIGKILLed workers while 40 children and their continuation run.

``run_fan_in`` enqueues one flow (``Pail.enqueue_flow``: 40 children, and a
merge that waits for all of them), starts worker OS processes
(``worker_main --flow``: ``Pail.work`` through the ``FaultProxy``), and until
the merge's result exists it SIGKILLs a worker after every
``kill_after_starts`` handler starts (restarting it at once), SIGKILLs the
worker running the merge's first run as soon as its record says so (that
run works until killed, so the continuation itself is cut short once,
however loaded the machine), and runs ``reap()`` on a schedule through the
proxy. Kills follow progress, as in ``runner.py``: a loaded machine slows the
run, it does not change what it proves. Then the network heals, the reaper
runs until nothing is pending, running or waiting, and the audit reads the
record and the bucket through a direct client:

* the executions, by ``audit.py``'s rules (no run without a lease, no run
  overlapping a live lease, every second run explained by a kill or an
  expiry);
* **the merge ran exactly once to its recorded end**: one result, from one of
  its executions; its other executions were cut short by a real kill;
* **after all 40**: each merge execution started after every child's
  recorded run (the one whose result counts) had ended, and read all 40
  results (its ``merge`` line);
* **with all 40 results**: the merge's result names, for each child, the
  lease of the run whose result the child's ``done/`` holds.
"""

from __future__ import annotations

import json
import random
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pail import Pail
from pail.codec import decode_result
from pail.errors import StorageError
from pail.keys import DONE, QUEUE, RUN, WAIT
from pail.local import LocalS3
from tests.chaos.audit import Execution, audit, complete_lines, read_executions
from tests.chaos.proxy import FaultProxy
from tests.chaos.runner import TICK, ChaosConfig, _connect, _Fleet, _listing

CHILDREN = 40
MERGE = CHILDREN
"""The merge's call number in the record (the children's are 0 to 39)."""


@dataclass(frozen=True, slots=True)
class FanInConfig:
    """The CI variant: 40 children, 4 workers, a kill every 5 handler starts, 5% faults."""

    children: int = CHILDREN
    workers: int = 4
    kill_after_starts: int = 5
    kill_the_merge: bool = True
    fault_rate: float = 0.05
    visibility_timeout: float = 1.5
    max_retries: int = 10
    reap_every: float = 1.0
    work_seconds: float = 0.2
    deadline: float = 300.0
    stall_limit: float = 60.0
    """The run fails when no handler started and no job ended for this long."""
    quiet_deadline: float = 20.0
    seed: int = 0

    def chaos(self) -> ChaosConfig:
        """The worker fleet's settings (``runner._Fleet``)."""
        return ChaosConfig(
            jobs=self.children + 1,
            workers=self.workers,
            kill_after_starts=self.kill_after_starts,
            fault_rate=self.fault_rate,
            visibility_timeout=self.visibility_timeout,
            max_retries=self.max_retries,
            reap_every=self.reap_every,
            work_seconds=self.work_seconds,
            seed=self.seed,
            worker_args=("--flow",),
        )


@dataclass
class FanInReport:
    """The figures and findings of one fan-in run."""

    kills: int = 0
    merge_kills: int = 0
    reaper_passes: int = 0
    executions: int = 0
    merge_starts: int = 0
    merge_ends: int = 0
    merge_results: int = 0
    """``done/`` objects of the merge holding a result (must be 1)."""
    merge_read: list[list[int]] = field(default_factory=list)
    """The calls whose results each merge execution read (each must be all 40)."""
    results_in_merge: int = 0
    """Children whose result the recorded merge names with the lease the child's done/ holds."""
    children_done: int = 0
    duplicates: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    stuck: list[str] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU of this process and of every worker process it started (and waited for)."""

    def summary(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()) if k != "requests")
        return (
            f"fan-in of {CHILDREN} children: {self.children_done} done; merge started "
            f"{self.merge_starts} times, ended {self.merge_ends}, results recorded "
            f"{self.merge_results}; read {[len(r) for r in self.merge_read]} results\n"
            f"  kills {self.kills} ({self.merge_kills} of the merge), reaper passes "
            f"{self.reaper_passes}, executions {self.executions}, duplicates explained "
            f"{dict(self.duplicates)}, violations {len(self.violations)}\n"
            f"  requests through the proxy {self.faults['requests']}, faults injected: {faults}\n"
            f"  {self.seconds:.1f} s, {self.cpu_seconds:.1f} CPU s (runner and workers), stuck "
            f"{len(self.stuck)}" + ("\n  STOPPED PROGRESSING" if self.timed_out else "")
        )


def _cpu() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_fan_in(server: LocalS3, bucket: str, workdir: Path, config: FanInConfig) -> FanInReport:
    """Run the fan-in chaos of the module docstring; see ``FanInReport`` for what it finds."""
    began, cpu = time.monotonic(), _cpu()
    report = FanInReport()
    chaos = config.chaos()
    rng = random.Random(config.seed)
    record = workdir / "executions.log"
    direct = _connect(bucket, server.endpoint_url, chaos)
    flow = direct.enqueue_flow(
        [{"n": n} for n in range(config.children)], then={"merge": True, "n": MERGE}
    )
    with FaultProxy(server.port, fault_rate=config.fault_rate, seed=config.seed) as proxy:
        faulty = _connect(bucket, proxy.endpoint_url, chaos)
        fleet = _Fleet(chaos, bucket, proxy.endpoint_url, record)
        try:
            report.timed_out = not _drain(
                config, fleet, faulty, direct, flow.then, record, report, rng
            )
        finally:
            fleet.stop()
        proxy.fault_rate = 0.0
        report.faults = Counter(proxy.counts)
    _quiet_down(direct, config, report)
    _audit(direct, list(flow.children), flow.then, record, fleet.killed, report)
    report.seconds = time.monotonic() - began
    report.cpu_seconds = _cpu() - cpu
    return report


def _merge_lines(record: Path) -> list[dict[str, Any]]:
    lines = complete_lines(record)  # workers are still appending to it
    return [entry for entry in map(json.loads, filter(None, lines)) if entry["k"] == "merge"]


def _drain(
    config: FanInConfig,
    fleet: _Fleet,
    faulty: Pail,
    direct: Pail,
    merge_id: str,
    record: Path,
    report: FanInReport,
    rng: random.Random,
) -> bool:
    """Kill, restart and reap until the merge's result exists; False if the run stops progressing."""
    start = time.monotonic()
    next_kill = config.kill_after_starts
    next_reap = start + config.reap_every
    next_check = start
    merge_seen = 0
    progress, progressed_at = (-1, -1), start
    while time.monotonic() - start < config.deadline:
        now = time.monotonic()
        if now - progressed_at > config.stall_limit:
            return False
        starts = fleet.progress()
        if starts >= next_kill and fleet.kill_one(rng):
            report.kills += 1
            next_kill = fleet.starts + config.kill_after_starts
        merges = _merge_lines(record)
        if config.kill_the_merge and len(merges) > merge_seen and report.merge_kills == 0:
            pid = int(merges[0]["pid"])  # the first run: it works until killed
            if fleet.kill_pid(pid):
                report.kills += 1
                report.merge_kills += 1
            elif pid in fleet.killed:  # a kill that followed progress got there first
                report.merge_kills += 1
        merge_seen = len(merges)
        if now >= next_reap:
            try:
                faulty.reap()
                report.reaper_passes += 1
            except StorageError:
                pass  # a reap that met too many faults: the next one goes on
            next_reap = now + config.reap_every
        if now >= next_check:
            done = len(_listing(direct, DONE))
            if direct.store.head(direct.keys.done(merge_id)) is not None:
                return True
            if (done, fleet.starts) != progress:
                progress, progressed_at = (done, fleet.starts), now
            next_check = now + 0.5
        time.sleep(TICK)
    return False


def _quiet_down(pail: Pail, config: FanInConfig, report: FanInReport) -> None:
    """Reap, with the network healed, until nothing is pending, running or waiting."""
    deadline = time.monotonic() + config.quiet_deadline
    while time.monotonic() < deadline:
        if not any(_listing(pail, state) for state in (QUEUE, RUN, WAIT)):
            return
        try:
            pail.reap()
            report.reaper_passes += 1
        except StorageError:
            pass
        time.sleep(0.25)  # leases of killed workers expire on the server's clock


def _ended_before(execution: Execution | None, moment: float) -> bool:
    return execution is not None and execution.ended is not None and execution.ended < moment


def _audit(
    pail: Pail,
    children: list[str],
    merge_id: str,
    record: Path,
    killed: dict[int, float],
    report: FanInReport,
) -> None:
    report.stuck = sorted(
        info.key for state in (QUEUE, RUN, WAIT) for info in _listing(pail, state)
    )
    winners: dict[int, str | None] = {}
    for job_id in children:
        obj = pail.store.get(pail.keys.done(job_id))
        if obj is not None and obj.body:
            result = decode_result(obj.body)
            winners[int(result["n"])] = result.get("lease")
    report.children_done = len(winners)
    merged = pail.store.get(pail.keys.done(merge_id))
    merge_result = decode_result(merged.body) if merged is not None and merged.body else None
    report.merge_results = int(isinstance(merge_result, dict) and merge_result.get("n") == MERGE)
    if isinstance(merge_result, dict):
        winners[MERGE] = merge_result.get("lease")
        named = merge_result.get("results", {})
        report.results_in_merge = sum(
            1 for n, lease in winners.items() if n != MERGE and named.get(str(n)) == lease
        )
    executions = read_executions(complete_lines(record))
    found = audit(executions, killed, winners)
    report.executions = found.executions
    report.duplicates, report.violations = found.duplicates, list(found.violations)
    merges = [e for e in executions if e.call == MERGE]
    report.merge_starts = len(merges)
    report.merge_ends = sum(1 for e in merges if e.ended is not None)
    report.merge_read = [list(entry["deps"]) for entry in _merge_lines(record)]
    report.violations += early_merges(executions, winners, len(children))


def early_merges(
    executions: list[Execution], winners: dict[int, str | None], children: int
) -> list[str]:
    """A violation for each merge run that started before every child's counted run had ended.

    A child's counted run is the one whose lease its recorded result names.
    """
    counted = {e.call: e for e in executions if e.call != MERGE and e.lease == winners.get(e.call)}
    found = []
    for merge in (e for e in executions if e.call == MERGE):
        early = [n for n in range(children) if not _ended_before(counted.get(n), merge.started)]
        if early:
            found.append(
                f"merge started by pid {merge.pid} before the counted runs of children {early} ended"
            )
    return found
