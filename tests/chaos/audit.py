"""The chaos run's audit of executions: every second run of a job explained, or a violation.

The workers append one JSON line per handler start and end (``worker_main``),
each with the lease it ran under, read through ``pail.current_job()``: the
job, the attempt, the lease's token and owner, the pid, ``t`` (the time by
``time.monotonic()``: ``CLOCK_MONOTONIC`` is one clock for every process of
the machine, so the lines of different workers compare), ``wall`` (for a
reader matching a line with the server's ``LastModified``) and ``live``: the
time until which the worker can be sure the lease is its own (``t`` plus
``Lease.remaining()``). ``live`` is conservative: it counts from when the
worker *sent* its last successful lease write, and the reaper reclaims a
lease only once the server's clock says it is older than the visibility
timeout (plus a second). The runner adds what only it knows: which pids it
SIGKILLed, and when (not the ones it stops at the end).

The rules (``audit``):

* **ran without a lease**: an execution whose start names no lease (a handler
  run outside a claim) is a violation. One whose lease had already run out by
  its own estimate as it started (a claim slowed past the visibility timeout)
  is a zombie from its start: allowed, counted (``started_expired``), and its
  lease protects nothing;
* **overlap with a live lease**: an execution that starts before an earlier
  execution's lease of the same job was surely over (its ``live``) is a
  violation, whether the earlier one still runs or was killed: a killed
  worker's lease stays in ``run/`` until it expires. (The chaos handlers never
  fail and the fleet never signals a worker, so no lease is given back early
  by a failure or a release; an audit of runs that do must record those.)
* every other execution after a job's first is a **duplicate**, explained by
  what happened to the execution before it: it was killed before it ended,
  or after it ended but before its result was recorded (a real SIGKILL,
  never the fleet's stop at the end), its lease expired while
  it still ran (a zombie), or it ended and its lease expired before its
  result was recorded (the result is then the earlier one's, if its write
  landed first, or the later one's). An earlier execution that held no lease
  explains nothing.
* **result without a run**: a recorded result whose lease token no recorded
  execution held.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KILLED = "after a kill before it ended"
ZOMBIE = "its lease expired while it ran (zombie)"
UNRECORDED = "it ended, its result not recorded (the lease expired first)"
LATE_RESULT = "it ended, its lease expired before its result landed"
KILLED_SETTLING = "after a kill once it ended, before its result was recorded"


@dataclass
class Execution:
    """One run of a handler, as its worker recorded it."""

    call: int
    job: str | None
    pid: int
    attempt: int | None
    lease: str | None
    started: float
    live: float
    ended: float | None = None

    def describe(self, origin: float) -> str:
        lease = f"lease {self.lease[:8]}" if self.lease else "no lease"
        return f"pid {self.pid} (attempt {self.attempt}, {lease}) at +{self.started - origin:.3f} s"


@dataclass
class Audit:
    """What the records show: executions, duplicates by cause, and violations."""

    executions: int = 0
    jobs_run: int = 0
    started_expired: int = 0
    """Runs whose lease had already run out (by their own estimate) as the handler started."""
    duplicates: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)

    def violate(self, kind: str, text: str) -> None:
        self.kinds[kind] += 1
        self.violations.append(f"{kind}: {text}")


def start_line(
    call: int, pid: int, now: float, lease: Mapping[str, Any] | None, job: str | None
) -> str:
    """The line a worker records as a handler starts; ``lease`` from ``lease_fields``."""
    fields = {"k": "start", "n": call, "pid": pid, "t": now, "wall": time.time(), "job": job}
    return json.dumps({**fields, **(lease or {})})


def end_line(call: int, pid: int, now: float, lease: Mapping[str, Any] | None) -> str:
    """The line a worker records as a handler returns."""
    fields = {"k": "end", "n": call, "pid": pid, "t": now, "wall": time.time()}
    return json.dumps({**fields, **(lease or {})})


def lease_fields(message: Any, now: float) -> dict[str, Any]:
    """What a record says about the lease a ``pail.Message`` holds at ``now``."""
    lease = message.lease
    lost = lease.lost
    remaining = lease.remaining()
    return {
        "job": message.id,
        "attempt": message.attempt,
        "lease": lease.record.lease,
        "owner": lease.record.owner,
        "lost": lost,
        "live": now + remaining if not lost and remaining > 0 else None,
    }


def complete_lines(record: Path) -> list[str]:
    """The record's whole lines; a line a worker is still appending is left for the next read.

    A reader may see a line half written (a ``read`` beside another process's
    ``write``), so only what ends in a newline is parsed.
    """
    if not record.exists():
        return []
    data = record.read_bytes()
    return data[: data.rfind(b"\n") + 1].decode().splitlines()


def read_executions(lines: Iterable[str]) -> list[Execution]:
    """The executions in a record's lines (a start, then perhaps its end, per pid and call)."""
    executions: list[Execution] = []
    open_runs: dict[tuple[int, int], Execution] = {}
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        key = (int(entry["n"]), int(entry["pid"]))
        live = entry.get("live")
        if entry["k"] == "start":
            execution = Execution(
                call=key[0],
                job=entry.get("job"),
                pid=key[1],
                attempt=entry.get("attempt"),
                lease=entry.get("lease"),
                started=float(entry["t"]),
                live=float(live) if live is not None else -math.inf,
            )
            executions.append(execution)
            open_runs[key] = execution
        elif entry["k"] == "end" and key in open_runs:
            execution = open_runs.pop(key)
            execution.ended = float(entry["t"])
            if live is not None and entry.get("lease") == execution.lease:
                execution.live = max(execution.live, float(live))
    return executions


def audit(
    executions: list[Execution],
    kills: Mapping[int, float],
    winners: Mapping[int, str | None],
) -> Audit:
    """Apply the module's rules.

    ``kills``: pid -> the time it was surely dead after a SIGKILL (only real
    kills). ``winners``: call -> the lease token of the execution whose result
    was recorded (None if the job was dead-lettered or has no result).
    """
    report = Audit(executions=len(executions))
    origin = min((execution.started for execution in executions), default=0.0)
    by_call: dict[int, list[Execution]] = defaultdict(list)
    for execution in executions:
        by_call[execution.call].append(execution)
    report.jobs_run = len(by_call)
    report.started_expired = sum(
        execution.lease is not None and execution.live == -math.inf for execution in executions
    )
    for call, runs in sorted(by_call.items()):
        runs.sort(key=lambda execution: execution.started)
        for index, later in enumerate(runs):
            name = f"call {call} (job {later.job})"
            if later.lease is None:
                report.violate("ran without a lease", f"{name}: {later.describe(origin)}")
            overlapped = False
            for earlier in runs[:index]:
                if later.started < earlier.live:
                    overlapped = True
                    state = "still running" if _running(earlier, kills, later.started) else "over"
                    report.violate(
                        "overlap with a live lease",
                        f"{name}: {later.describe(origin)} started while the lease of "
                        f"{earlier.describe(origin)} ({state}) was live until "
                        f"+{earlier.live - origin:.3f} s",
                    )
            if index and not overlapped:  # an overlap is a violation, not a duplicate
                cause = _cause(runs[index - 1], later, kills, winners.get(call))
                if cause is None:
                    report.violate(
                        "unexplained duplicate",
                        f"{name}: {later.describe(origin)} after "
                        f"{runs[index - 1].describe(origin)}, which held no lease",
                    )
                else:
                    report.duplicates[cause] += 1
        winner = winners.get(call)
        if winner is not None and winner not in {execution.lease for execution in runs}:
            report.violate("result without a run", f"call {call}: lease {winner[:8]} ran nothing")
    return report


def _running(execution: Execution, kills: Mapping[int, float], at: float) -> bool:
    if execution.ended is not None:
        return at < execution.ended
    killed = kills.get(execution.pid)
    return killed is None or at < killed


def _cause(
    earlier: Execution, later: Execution, kills: Mapping[int, float], winner: str | None
) -> str | None:
    """Why ``later`` ran again after ``earlier``; None if nothing explains it."""
    if earlier.lease is None:
        return None
    killed = kills.get(earlier.pid)
    if earlier.ended is None and killed is not None and earlier.started <= killed <= later.started:
        return KILLED
    if _running(earlier, kills, later.started):
        return ZOMBIE
    if earlier.ended is not None and killed is not None and killed <= later.started:
        return KILLED_SETTLING if earlier.lease != winner else LATE_RESULT
    return UNRECORDED if earlier.lease != winner else LATE_RESULT
