"""What must hold, checked after every step and at quiescence; and the trace to explain a failure.

The ``Ledger`` hears every change the store applies (with the actor that
made it and the exact simulated time), every execution of a handler, and
what the operator's calls returned. From that it checks, as the run goes:

* **nothing is lost:** once enqueued, a job always has at least one of its
  ``queue/``, ``run/``, ``done/`` or ``dlq/`` objects;
* **results are immutable:** ``done/{id}``, once visible, is never replaced
  or deleted; the one exception is a redrive taking a dead job back, which
  removes the job's *dead* marker once a redriven entry for it is pending;
* **one terminal state:** a ``dlq/`` record always has a dead ``done/``
  marker beside it (never a success, never a cancellation);
* **no parallel execution:** a handler may *start* only while its worker
  holds the current lease and no other worker holds a live one. "Holds" is
  exact: the object at ``run/{id}`` is the worker's own write (a creation or
  a renewal by that process; the reaper's fence is not), and it is live: the
  server applied it less than ``visibility_timeout`` ago, by the exact
  simulated time (stricter than the one-second ``LastModified`` the reaper
  judges by). A start on a lease that lapsed (a stall after the claim's
  last write) or that someone else rewrote is a violation at once, not a
  statistic. (A cancel deletes a live lease without waiting for it to
  expire, and a handler whose claim ended just before may start on it: the
  lease is still no one else's and still within its life, and the worker
  learns of the cancel at its next renewal.) Afterwards a lease may still
  lapse mid-run (a late heartbeat,
  a stall): that is at-least-once delivery, and the next owner's start is
  checked by the same rule. As a second, independent check, two executions
  never overlap at a moment when both their leases were valid;
* **no run after the end:** once a job was made terminal by a writer that
  still held a valid lease, no execution starts on it with a valid lease;
  and no claim that starts after a cancellation's commit point runs the job;
* **retries obey the policy:** no attempt number exceeds ``max_retries + 1``;
* **every write is unique:** no write puts bytes on a key that an earlier
  write put there (markers included). S3's ETag in a standard bucket is the
  MD5 of the body, so equal bytes would make ``If-Match`` unable to tell
  two writes apart (ABA);
* **no actor dies:** a worker loop, a reaper or an operator that raises
  anything but the errors it handles is a violation (its loop is gone).

and at quiescence: every job is terminal exactly once, nothing is left in
``queue/`` or ``run/``, a job that ``cancel`` said was cancelled ended
cancelled, and a job was executed *cleanly* (to the end, with a lease valid
throughout) at most ``max_retries + 1`` times per life (a redrive starts a
new life).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from pail.codec import META_OUTCOME, OUTCOME_CANCELLED, OUTCOME_DEAD, life_of
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
    SAME_BYTES = "same-bytes"
    """Two writes put the same bytes on one key: their ETags are equal (ABA)."""
    CANCEL_LOST = "cancel-lost"
    """``cancel`` returned True, and the job ended otherwise."""
    STATUS = "status"
    """``status`` contradicted an outcome that stood for the whole call."""
    ACTOR_DIED = "actor-died"
    """A worker loop, reaper or operator raised: its loop is gone."""
    TWO_SHARDS = "two-shards"
    """A job's keys in two shard segments: a job must keep the shard it was enqueued in."""
    FOREIGN = "foreign-bytes"
    """A foreign object was not quarantined, passed by or left alone as the rule says (``hostile``)."""
    PAUSE = "claimed-while-paused"
    """A worker claimed a job after a refill of its own had seen the queue paused (``pausing``)."""
    NAMED_WAKE = "named-wake-cost"
    """An invocation whose named entries were gone sent more than their GETs (``named``)."""
    TICK = "schedule-tick"
    """A schedule's tick has two jobs, or a pass ended leaving a due tick without one (``ticking``)."""
    DEPENDENCY = "dependency"
    """A dependent was made pending or ran before its dependencies succeeded, or waits forever
    though they all ended (``dependencies``)."""
    LIMIT = "concurrency-limit"
    """A handler with a live lease holds no slot naming it, or more run than any limit (``limits``)."""
    SLOT_LOST = "slot-lost"
    """A concurrency slot is still held when the run ends (``limits``)."""
    RATE = "rate-limit"
    """A handler started under a rate limit without a start token of its own taken by its
    claim, a token was written over, or a window granted more than its rate (``limits``)."""


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
    life: int = 0
    """How many redrives the job had when this execution started."""

    def label(self) -> str:
        return f"{self.process.name} attempt {self.attempt} [{self.start:.3f}, {self.end}]"


@dataclass(eq=False)
class JobState:
    job_id: str
    present: set[str] = field(default_factory=set)
    shard: str | None = None
    """The shard segment of the job's keys ("" in the flat layout), once one was written."""
    enqueued: bool = False
    recreated: bool = False
    """A first-attempt entry was written again after a worker's lease (a resent enqueue)."""
    dead: bool = False
    outcome: str | None = None
    terminal_at: float | None = None
    terminal_by_valid_writer: bool = False
    run_writes: list[tuple[Process, float]] = field(default_factory=list)
    lease_writer: Process | None = None
    """Who wrote the object now at ``run/{id}`` (None: there is none)."""
    lease_written_at: float = 0.0
    cancelled_lease: tuple[Process, float] | None = None
    """The lease a cancellation deleted: who held it, and when they last wrote it."""
    executions: list[Execution] = field(default_factory=list)
    redrives: int = 0
    life: int = 0
    """The job's current life: the highest ``redriven`` of any entry or lease written."""
    outcome_life: int = 0
    dlq_life: int = 0
    """The life of the present ``dlq/`` record."""
    cancelled_at: float | None = None
    cancel_returned_true: bool = False


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
        self.foreign_writers: set[Process] = set()
        """Processes that stand for other systems writing the bucket (``hostile``): their
        bytes are not pail's, so the unique-bytes rule is not theirs to keep."""
        self._bodies: dict[str, dict[bytes, int]] = {}
        self.call = 0
        """The store call being applied: tries of one call (botocore's resends) are one write."""

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
        if after is not None and not (actor is not None and actor.process in self.foreign_writers):
            self._check_unique_bytes(key, after)
        # A sharded key (queue/{shard}/{id}) names its job by its last segment.
        prefix, _, rest = key.partition("/")
        job_id = rest.rpartition("/")[2]
        job = self.jobs.get(job_id)
        if job is None:
            return
        segment = rest.rpartition("/")[0]
        if after is not None and job.shard is None:
            job.shard = segment
        elif after is not None and job.shard != segment:
            self._violate(
                Kind.TWO_SHARDS, job_id, f"{key} written; its keys were in shard {job.shard!r}"
            )
        now = self._scheduler.now
        if after is None:
            job.present.discard(prefix)
            self.live[prefix] -= 1
        elif before is None:
            job.present.add(prefix)
            self.live[prefix] += 1
        if prefix in (QUEUE, RUN) and after is not None:
            job.life = max(job.life, _int(_json(after.body).get("redriven", 0)))
        if prefix == DLQ and after is not None:
            job.dlq_life = _int(_json(after.body).get("redriven", 0))
        if prefix == QUEUE and after is not None:
            if not job.enqueued:
                job.enqueued = True
                self.enqueued += 1
            elif before is None and job.run_writes and not job.recreated:
                job.recreated = self._first_attempt(after)
            if _json(after.body).get("cancelled"):
                self.cancelled(job_id)
            self._check_attempts(job, after, "queue", limit=self._max_attempt() - 1)
        if prefix == RUN:
            if after is None and job.outcome == OUTCOME_CANCELLED and job.lease_writer is not None:
                # A cancel takes a live lease away without waiting for it to expire;
                # its owner learns at its next renewal (cancellation is cooperative).
                job.cancelled_lease = (job.lease_writer, job.lease_written_at)
            job.lease_writer = actor.process if actor is not None and after is not None else None
            job.lease_written_at = now
            if after is not None:
                if actor is not None:
                    job.run_writes.append((actor.process, now))
                self._check_attempts(job, after, "run", limit=self._max_attempt())
        if prefix == DONE and before is not None:
            self._done_removed(job, before, after)
        resurrected = (
            prefix == DONE
            and after is not None
            and after.metadata.get(META_OUTCOME) == OUTCOME_DEAD
            and _life(after) < job.life
        )
        if resurrected:
            # A late write (a stalled dead-letter, a resend) of a life a redrive
            # took back: not an outcome; whoever meets it must remove it.
            self.counts["late_markers"] += 1
            self.note(f"job {job_id}: a dead marker of an earlier life was written late")
        makes_terminal = prefix == DONE or (prefix == DLQ and self.rules is Rules.ORIGINAL)
        if makes_terminal and after is not None and job.terminal_at is None and not resurrected:
            job.terminal_at = now
            self.terminal += 1
            writer = actor.process if actor is not None else None
            job.terminal_by_valid_writer = writer is not None and self._holds(job, writer, now)
        if prefix == DONE and after is not None and before is None and not resurrected:
            job.outcome = after.metadata.get(META_OUTCOME)
            job.outcome_life = _life(after)
            job.dead = job.outcome == OUTCOME_DEAD
            if job.outcome == OUTCOME_CANCELLED:
                self.cancelled(job_id)
        self._check_step(job)

    def _done_removed(
        self, job: JobState, before: StoredObject, after: StoredObject | None
    ) -> None:
        """``done/{id}`` changed: only a redrive may remove it, and only a dead marker."""
        dead = after is None and before.metadata.get(META_OUTCOME) == OUTCOME_DEAD
        if dead and _life(before) < job.life and self.rules is Rules.PAIL:
            ended_here = job.terminal_at is not None and job.outcome_life == _life(before)
            if not ended_here:
                self.note(f"job {job.job_id}: a dead marker of an earlier life is gone")
                return
            job.redrives += 1
            job.dead, job.outcome = False, None
            job.terminal_at = None
            job.terminal_by_valid_writer = False
            self.terminal -= 1
            self.note(f"job {job.job_id} redriven: its dead marker is gone, life {job.life} begins")
            return
        what = "deleted" if after is None else "overwritten"
        outcome = before.metadata.get(META_OUTCOME, "a result")
        self._violate(
            Kind.RESULT_CHANGED,
            job.job_id,
            f"done/{job.job_id} ({outcome}) was {what} once visible",
        )

    def cancelled(self, job_id: str) -> None:
        """A cancellation passed its commit point (a marked entry, or the cancelled marker)."""
        job = self.jobs.get(job_id)
        # A job that has ended (dead, done) has no commit point left to pass: the mark landed on
        # an entry that outlived the job (a resent enqueue re-created it), the cancel then finds
        # the outcome and says "ended", and a later redrive starts a new life that may run.
        if job is not None and job.cancelled_at is None and job.terminal_at is None:
            job.cancelled_at = self._scheduler.now

    def cancel_returned(self, job_id: str, cancelled: bool) -> None:
        """``Pail.cancel(job_id)`` returned ``cancelled``."""
        job = self.jobs.get(job_id)
        if job is not None and cancelled:
            job.cancel_returned_true = True

    def status_read(
        self, job_id: str, began: float, state: str | None, outcome: str | None
    ) -> None:
        """``status`` returned ``state``; ``outcome`` is the one that stood throughout the call."""
        expected = {"succeeded": "done", OUTCOME_CANCELLED: "cancelled"}.get(outcome or "")
        if expected is not None and state != expected:
            self._violate(
                Kind.STATUS,
                job_id,
                f"status read from t={began:.3f} said {state!r} while the job was {expected}",
            )

    def actor_died(self, actor: Actor, exc: BaseException) -> None:
        self._violate(Kind.ACTOR_DIED, "-", f"{actor.name} raised {type(exc).__name__}: {exc}")

    def execution_started(
        self, process: Process, job_id: str, attempt: int, claim_started: float
    ) -> Execution:
        now = self._scheduler.now
        job = self.jobs[job_id]
        execution = Execution(job_id, process, attempt, claim_started, now, life=job.life)
        job.executions.append(execution)
        self.open_executions += 1
        self.counts["executions"] += 1
        self.note(f"execution starts: job {job_id} attempt {attempt}")
        self._check_start(job, execution)
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
        if job.cancelled_at is not None and claim_started > job.cancelled_at:
            self._violate(
                Kind.RAN_AFTER_END,
                job_id,
                f"{execution.label()} claimed at t={claim_started:.3f}, "
                f"after its cancellation at t={job.cancelled_at:.3f}",
            )
        return execution

    def _check_start(self, job: JobState, execution: Execution) -> None:
        """The handler may start only while its worker holds the current, live lease."""
        now, holder = self._scheduler.now, job.lease_writer
        taken = job.cancelled_lease
        if holder is None and taken is not None and taken[0] is execution.process:
            holder, written_at = taken  # the cancel took it while it was live: still no one else's
            if now < written_at + self.vt:
                self.counts["started_as_cancelled"] += 1
                return
        if holder is not execution.process:
            who = "no lease" if holder is None else f"the lease of {holder.name}"
            live = holder is not None and now < job.lease_written_at + self.vt
            other = f" (live, written at t={job.lease_written_at:.3f})" if live else ""
            self._violate(
                Kind.PARALLEL,
                job.job_id,
                f"{execution.label()} started while run/{job.job_id} is {who}{other}, "
                "not the lease of its own worker",
            )
        elif now >= job.lease_written_at + self.vt:
            self._violate(
                Kind.PARALLEL,
                job.job_id,
                f"{execution.label()} started on a lapsed lease (last written at "
                f"t={job.lease_written_at:.3f}, lapsed at t={job.lease_written_at + self.vt:.3f})",
            )

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
            if DLQ in job.present and job.dlq_life < job.life:
                self._violate(
                    Kind.TERMINAL, job.job_id, "a dlq/ record of a life a redrive took back is left"
                )
            if job.cancel_returned_true and job.outcome != OUTCOME_CANCELLED:
                self._violate(
                    Kind.CANCEL_LOST,
                    job.job_id,
                    f"cancel returned True, and the job ended {job.outcome or 'with no outcome'}",
                )
            left = sorted(job.present & {QUEUE, RUN})
            if left and job.terminal_at is not None:
                self._violate(Kind.STUCK, job.job_id, f"terminal but still has {left}")
            limit = self._max_attempt()
            for life in range(job.life + 1):
                clean = [e for e in job.executions if e.life == life and self.is_clean(e)]
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
            for execution in job.executions:
                if execution.crashed:
                    out["executions_crashed"] += 1
                elif self.is_clean(execution):
                    out["executions_clean"] += 1
                else:
                    out["executions_lapsed"] += 1
            out["duplicates"] += max(0, len(job.executions) - 1 - job.redrives)
            out["redrives"] += job.redrives
            if job.outcome == OUTCOME_CANCELLED:
                out["jobs_cancelled"] += 1
            else:
                out["jobs_dead" if job.dead else "jobs_done"] += 1
        return out

    # -- internals ----------------------------------------------------------

    def _max_attempt(self) -> int:
        return 1_000_000 if self.max_retries is None else self.max_retries + 1

    def _first_attempt(self, obj: StoredObject) -> bool:
        data = _json(obj.body)
        return _int(data.get("attempts", 0)) == 0 and not data.get("redriven")

    def violate(self, kind: Kind, job_id: str, detail: str) -> None:
        """Record a violation found outside the ledger (``tests/simulation/hostile.py``)."""
        self._violate(kind, job_id, detail)

    def _violate(self, kind: Kind, job_id: str, detail: str) -> None:
        job = self.jobs.get(job_id)
        if kind in (Kind.RAN_AFTER_END, Kind.RETRY_POLICY) and job is not None and job.recreated:
            # botocore resends a create-only PUT whose response was lost; if a worker took
            # the job meanwhile, the resend creates the entry again (every claim's done/
            # check closes this). The cause helps the reader; the violation is the same.
            detail += "; its entry was re-created by a resent enqueue"
        violation = Violation(kind, job_id, detail, self._scheduler.now)
        self.violations.append(violation)
        self.note(f"VIOLATION {violation}")

    def _check_unique_bytes(self, key: str, after: StoredObject) -> None:
        if self.rules is not Rules.PAIL:
            return  # pailq 0.1.1 rewrites the same bytes (its heartbeats); it has no If-Match
        digest = hashlib.blake2b(after.body, digest_size=16).digest()
        seen = self._bodies.setdefault(key, {})
        if seen.get(digest, self.call) != self.call:
            job_id = key.rpartition("/")[2]
            self._violate(
                Kind.SAME_BYTES,
                job_id,
                f"{key} written with bytes an earlier write put there: {after.body[:60]!r}",
            )
        seen.setdefault(digest, self.call)

    def _check_step(self, job: JobState) -> None:
        if job.enqueued and not job.present:
            self._violate(Kind.LOST, job.job_id, "no queue/, run/, done/ or dlq/ object left")
        if self.rules is Rules.PAIL:
            leftover = job.dlq_life < job.life  # a late write of a past life: cleared when met
            if DLQ in job.present and not (DONE in job.present and job.dead) and not leftover:
                self._violate(Kind.TERMINAL, job.job_id, "dlq/ record without a dead done/ marker")
        elif DLQ in job.present and DONE in job.present:
            self._violate(Kind.TERMINAL, job.job_id, "both done/ and dlq/")

    def _check_attempts(self, job: JobState, obj: StoredObject, where: str, limit: int) -> None:
        if self.rules is not Rules.PAIL:
            return
        attempts = _int(_json(obj.body).get("attempts", 0))
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
                or "VIOLATION" in event.text
            ):
                lines.append(f"{event.at:10.3f}  {event.actor:<14} {event.text}")
        if len(lines) > limit:
            lines = [*lines[: limit // 2], "   ...", *lines[-limit // 2 :]]
        return lines


def _json(body: bytes) -> dict[str, object]:
    """A body's JSON object, or ``{}`` for anything else (the ledger never trusts bytes either)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _life(obj: StoredObject) -> int:
    """The life an outcome under ``done/`` ends (its ``pail-life`` metadata)."""
    return life_of(obj.metadata)
