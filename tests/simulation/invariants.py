"""What must hold, checked after every step and at quiescence; and the trace to explain a failure.

The ``Ledger`` hears every change the store applies (with the actor that
made it and the exact simulated time), and every execution of a handler.
From that it checks, as the run goes:

* **nothing is lost:** once enqueued, a job always has at least one of its
  ``queue/``, ``run/``, ``done/`` or ``dlq/`` objects;
* **results are immutable:** ``done/{id}``, once visible, is never replaced
  or deleted;
* **one terminal state:** a job is never both done and dead-lettered;
* **no parallel execution:** two executions of a job never overlap at a
  moment when both their leases were valid. A lease written (created or
  renewed) at server time ``t`` is valid until ``t + visibility_timeout``;
  this is judged with the exact time the server applied the write, which
  is stricter than the one-second LastModified the reaper sees;
* **no run after the end:** once a job was made terminal by a writer that
  still held a valid lease, no execution starts on it with a valid lease;
* **retries obey the policy:** no attempt number exceeds ``max_retries + 1``.

and at quiescence: every job is terminal exactly once, nothing is left in
``queue/`` or ``run/``, and a job was executed *cleanly* (to the end, with a
lease valid throughout) at most ``max_retries + 1`` times. Executions that
a crash cut short, or whose lease lapsed (a stall, a late heartbeat), are
counted separately.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from pail.codec import META_OUTCOME, OUTCOME_DEAD
from pail.store.base import StoredObject
from tests.simulation.scheduler import Actor, Process, Scheduler

QUEUE, RUN, DONE, DLQ = "queue", "run", "done", "dlq"


class Kind(StrEnum):
    """The invariant a violation breaks."""

    LOST = "lost"
    STUCK = "stuck"
    RESULT_CHANGED = "result-changed"
    TERMINAL = "terminal-state"
    PARALLEL = "parallel-execution"
    RAN_AFTER_END = "ran-after-end"
    RETRY_POLICY = "retry-policy"
    RESENT_ENQUEUE_RERUN = "resent-enqueue-rerun"
    """A run again or past the policy, of a job whose entry a resent enqueue re-created.

    botocore resends a create-only PUT whose response was lost; if a worker
    took the job meanwhile, the resend creates the entry again. Every claim's
    ``done/`` check closes this (regression seed 1603); it is told apart from
    the other reruns because its cause lies outside the workers.
    """


class Rules(StrEnum):
    """How a model stores a terminal state."""

    PAIL = "pail"
    """``done/{id}`` always; a dead job's is a null marker plus a ``dlq/{id}`` record."""
    ORIGINAL = "original"
    """pailq 0.1.1: ``done/{id}`` or ``dlq/{id}``."""


@dataclass(frozen=True, slots=True)
class Violation:
    kind: Kind
    job_id: str
    detail: str
    at: float

    def __str__(self) -> str:
        return f"[{self.kind}] job {self.job_id} at t={self.at:.3f}: {self.detail}"


@dataclass(eq=False)
class Execution:
    """One run of a handler on a job, from handler start to handler end (or crash)."""

    job_id: str
    process: Process
    attempt: int
    claim_started: float
    start: float
    end: float | None = None
    crashed: bool = False
    recorded: bool | None = None
    """Whether the settle after it took effect (None: not settled)."""

    def label(self) -> str:
        return f"{self.process.name} attempt {self.attempt} [{self.start:.3f}, {self.end}]"


@dataclass(eq=False)
class JobState:
    job_id: str
    present: set[str] = field(default_factory=set)
    enqueued: bool = False
    recreated: bool = False
    dead: bool = False
    terminal_at: float | None = None
    terminal_by_valid_writer: bool = False
    run_writes: list[tuple[Process, float]] = field(default_factory=list)
    executions: list[Execution] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    actor: str
    text: str


class Ledger:
    """Records the run and checks the invariants (see the module docstring)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        visibility_timeout: float,
        max_retries: int | None,
        rules: Rules = Rules.PAIL,
    ) -> None:
        self._scheduler = scheduler
        self.vt = visibility_timeout
        self.max_retries = max_retries
        self.rules = rules
        self.jobs: dict[str, JobState] = {}
        self.violations: list[Violation] = []
        self.events: list[Event] = []
        self.live: Counter[str] = Counter()
        self.terminal = 0
        self.enqueued = 0
        self.open_executions = 0
        self.counts: Counter[str] = Counter()

    # -- recording ----------------------------------------------------------

    def expect(self, job_id: str) -> None:
        """A producer is about to enqueue ``job_id``."""
        self.jobs.setdefault(job_id, JobState(job_id))

    def note(self, text: str, actor: Actor | None = None) -> None:
        actor = actor or self._scheduler.current
        self.events.append(Event(self._scheduler.now, actor.name if actor else "-", text))

    def request(self, actor: Actor | None, op: str, key: str, outcome: str) -> None:
        self.events.append(
            Event(self._scheduler.now, actor.name if actor else "-", f"{op} {key} -> {outcome}")
        )

    def mutated(
        self, key: str, before: StoredObject | None, after: StoredObject | None, actor: Actor | None
    ) -> None:
        prefix, _, job_id = key.partition("/")
        job = self.jobs.get(job_id)
        if job is None:
            return
        now = self._scheduler.now
        if after is None:
            job.present.discard(prefix)
            self.live[prefix] -= 1
        elif before is None:
            job.present.add(prefix)
            self.live[prefix] += 1
        if prefix == QUEUE and after is not None:
            if not job.enqueued:
                job.enqueued = True
                self.enqueued += 1
            elif before is None and job.run_writes and not job.recreated:
                job.recreated = self._first_attempt(after)
            self._check_attempts(job, after, "queue", limit=self._max_attempt() - 1)
        if prefix == RUN and after is not None:
            if actor is not None:
                job.run_writes.append((actor.process, now))
            self._check_attempts(job, after, "run", limit=self._max_attempt())
        if prefix == DONE and before is not None:
            what = "deleted" if after is None else "overwritten"
            self._violate(Kind.RESULT_CHANGED, job_id, f"done/{job_id} was {what} once visible")
        makes_terminal = prefix == DONE or (prefix == DLQ and self.rules is Rules.ORIGINAL)
        if makes_terminal and after is not None and job.terminal_at is None:
            job.terminal_at = now
            self.terminal += 1
            writer = actor.process if actor is not None else None
            job.terminal_by_valid_writer = writer is not None and self._holds(job, writer, now)
        if prefix == DONE and after is not None and before is None:
            job.dead = after.metadata.get(META_OUTCOME) == OUTCOME_DEAD or after.body == b"null"
        self._check_step(job)

    def execution_started(
        self, process: Process, job_id: str, attempt: int, claim_started: float
    ) -> Execution:
        now = self._scheduler.now
        execution = Execution(job_id, process, attempt, claim_started, now)
        job = self.jobs[job_id]
        job.executions.append(execution)
        self.open_executions += 1
        self.counts["executions"] += 1
        self.note(f"execution starts: job {job_id} attempt {attempt}")
        if attempt > self._max_attempt():
            self._violate(
                Kind.RETRY_POLICY, job_id, f"attempt {attempt} ran, max_retries={self.max_retries}"
            )
        ended = job.terminal_at is not None and job.terminal_by_valid_writer
        if ended and self._valid_at(execution, now):
            self._violate(
                Kind.RAN_AFTER_END,
                job_id,
                f"{execution.label()} started with a valid lease after the job ended "
                f"at t={job.terminal_at:.3f}",
            )
        return execution

    def execution_ended(self, execution: Execution, *, crashed: bool = False) -> None:
        if execution.end is not None:
            return
        execution.end = self._scheduler.now
        execution.crashed = crashed
        self.open_executions -= 1
        self.note(f"execution {'crashed' if crashed else 'ends'}: job {execution.job_id}")
        job = self.jobs[execution.job_id]
        mine = self._valid_spans(execution)
        for other in job.executions:
            if other is execution or other.end is None:
                continue
            theirs = self._valid_spans(other)
            if any(max(a, c) < min(b, d) for a, b in mine for c, d in theirs):
                self._violate(
                    Kind.PARALLEL,
                    execution.job_id,
                    f"{execution.label()} and {other.label()} ran at once, both leases valid",
                )

    def process_crashed(self, process: Process) -> None:
        self.counts["crashes"] += 1
        self.note(f"process {process.name} crashes")
        for job in self.jobs.values():
            for execution in job.executions:
                if execution.process is process and execution.end is None:
                    self.execution_ended(execution, crashed=True)

    # -- quiescence ---------------------------------------------------------

    def check_quiescent(self) -> None:
        """The end-of-run invariants; call once the run is over."""
        now = self._scheduler.now
        for job in self.jobs.values():
            for execution in job.executions:
                if execution.end is None:
                    execution.end = now
            if not job.enqueued:
                continue  # its enqueue failed before reaching the bucket
            if job.terminal_at is None:
                left = sorted(job.present)
                kind = Kind.STUCK if left else Kind.LOST
                self._violate(kind, job.job_id, f"not terminal at quiescence; objects: {left}")
            elif self.rules is Rules.PAIL and job.dead and DLQ not in job.present:
                self._violate(Kind.TERMINAL, job.job_id, "dead marker without a dlq/ record")
            left = sorted(job.present & {QUEUE, RUN})
            if left and job.terminal_at is not None:
                self._violate(Kind.STUCK, job.job_id, f"terminal but still has {left}")
            clean = [e for e in job.executions if self.is_clean(e)]
            limit = self._max_attempt()
            if len(clean) > limit:
                runs = "; ".join(e.label() for e in clean)
                self._violate(
                    Kind.RETRY_POLICY,
                    job.job_id,
                    f"{len(clean)} clean executions > {limit}: {runs}",
                )

    def is_clean(self, execution: Execution) -> bool:
        """Ran to its end with its lease valid throughout."""
        if execution.crashed or execution.end is None:
            return False
        return any(
            a <= execution.start and b >= execution.end for a, b in self._valid_spans(execution)
        )

    def summary(self) -> Counter[str]:
        """Counts for reports: executions by kind, duplicates, crashes."""
        out = Counter(self.counts)
        for job in self.jobs.values():
            clean = 0
            for execution in job.executions:
                if execution.crashed:
                    out["executions_crashed"] += 1
                elif self.is_clean(execution):
                    clean += 1
                    out["executions_clean"] += 1
                else:
                    out["executions_lapsed"] += 1
            out["duplicates"] += max(0, len(job.executions) - 1)
            out["jobs_dead" if job.dead else "jobs_done"] += 1
        return out

    # -- internals ----------------------------------------------------------

    def _max_attempt(self) -> int:
        return 1_000_000 if self.max_retries is None else self.max_retries + 1

    def _first_attempt(self, obj: StoredObject) -> bool:
        try:
            data = json.loads(obj.body)
        except ValueError:
            return False
        return int(data.get("attempts", 0)) == 0 and not data.get("redriven")

    def _violate(self, kind: Kind, job_id: str, detail: str) -> None:
        if kind in (Kind.RAN_AFTER_END, Kind.RETRY_POLICY) and self.jobs[job_id].recreated:
            kind = Kind.RESENT_ENQUEUE_RERUN
        violation = Violation(kind, job_id, detail, self._scheduler.now)
        self.violations.append(violation)
        self.note(f"VIOLATION {violation}")

    def _check_step(self, job: JobState) -> None:
        if job.enqueued and not job.present:
            self._violate(Kind.LOST, job.job_id, "no queue/, run/, done/ or dlq/ object left")
        if self.rules is Rules.PAIL:
            if DLQ in job.present and not (DONE in job.present and job.dead):
                self._violate(Kind.TERMINAL, job.job_id, "dlq/ record without a dead done/ marker")
        elif DLQ in job.present and DONE in job.present:
            self._violate(Kind.TERMINAL, job.job_id, "both done/ and dlq/")

    def _check_attempts(self, job: JobState, obj: StoredObject, where: str, limit: int) -> None:
        if self.rules is not Rules.PAIL:
            return
        try:
            attempts = int(json.loads(obj.body).get("attempts", 0))
        except (ValueError, AttributeError):
            return
        if attempts > limit:
            self._violate(
                Kind.RETRY_POLICY,
                job.job_id,
                f"{where}/ written with attempts={attempts} > {limit}",
            )

    def _holds(self, job: JobState, process: Process, at: float) -> bool:
        """Whether ``process`` held a valid lease on ``job`` at ``at``."""
        latest = max((t for p, t in job.run_writes if p is process and t <= at), default=None)
        return latest is not None and at < latest + self.vt

    def _writes(self, execution: Execution, until: float) -> list[float]:
        job = self.jobs[execution.job_id]
        return [
            t
            for p, t in job.run_writes
            if p is execution.process and execution.claim_started <= t <= until
        ]

    def _valid_at(self, execution: Execution, at: float) -> bool:
        writes = self._writes(execution, at)
        return bool(writes) and at < max(writes) + self.vt

    def _valid_spans(self, execution: Execution) -> list[tuple[float, float]]:
        """The times within the execution when its lease was valid, as merged intervals."""
        end = execution.end if execution.end is not None else self._scheduler.now
        spans: list[tuple[float, float]] = []
        for t in sorted(self._writes(execution, end)):
            if spans and t <= spans[-1][1]:
                spans[-1] = (spans[-1][0], t + self.vt)
            else:
                spans.append((t, t + self.vt))
        clipped = [(max(a, execution.start), min(b, end)) for a, b in spans]
        return [(a, b) for a, b in clipped if a < b or (a == b == execution.start)]

    # -- traces -------------------------------------------------------------

    def trace(self, job_ids: set[str], limit: int = 400) -> list[str]:
        """The events that concern ``job_ids``, plus every crash: a minimal replayable story."""
        lines = []
        for event in self.events:
            if (
                any(j in event.text for j in job_ids)
                or "crashes" in event.text
                or ("stalls" in event.text)
            ):
                lines.append(f"{event.at:10.3f}  {event.actor:<14} {event.text}")
        if len(lines) > limit:
            lines = [*lines[: limit // 2], "   ...", *lines[-limit // 2 :]]
        return lines
