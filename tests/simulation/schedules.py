"""Named schedules: each pins one interleaving the issues name, on the simulated bucket.

The random sweep finds interleavings; a schedule *is* one. It is a small run
with chaos off (no random fault, crash or stall) whose one fault is aimed
(``harness.Aim``): a pause before a named request of a transition. Where the
race needs a second actor, the schedule starts it at the moment the pause
begins (``World.on_aim``), so the race happens inside the pause every time.
Every invariant of ``invariants.py`` is checked, as in the sweep.

* **Scenario 3 (issue 12, defect 3):** a claimer stalls after its lease
  write, or after deleting the entry, past the lease; the reaper requeues and
  another worker claims and runs the job; the first wakes.
* **Defect 0 (issue 18):** a cancel races each request of a redrive (and, in
  a variant, the redriven job's owner completes after the cancel).
* **Issue 17:** a worker crashes as an overlapped request is sent: its
  background removal of the lease after ``done/``, or the claim's HEAD beside
  its DELETE.
* **Scenarios 1 and 2 (issue 12, defects 1 and 2):** hostile objects (what
  pailq 0.1.1 writes for a NaN payload, wrong types, deep nesting) sort
  before the good jobs under ``queue/`` and ``run/``; the workers must still
  finish the good jobs and the reaper must still reap past them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pail.errors import JobNotFoundError
from pail.queue import Pail
from tests.simulation.harness import PAIL, Aim, AimAction, Outcome, SimConfig, World
from tests.simulation.scheduler import Actor
from tests.simulation.sim_store import FaultRates, Latency

VT = 2.0

CALM = SimConfig(
    seed=0,
    jobs=1,
    workers=2,
    reapers=1,
    max_retries=3,
    visibility_timeout=VT,
    fail_probability=0.0,
    long_handler_probability=0.0,
    faults=FaultRates(),
    latency=Latency(low=0.01, high=0.02, tail_probability=0.0),
    crash_probability=0.0,
    stall_probability=0.0,
    heartbeat_delay_probability=0.0,
    express=False,
    page_size=100,
    reaper_page_size=1000,
    reaper_max_pages=10,
    reaper_period=0.5,
    enqueue_window=0.0,
    chaos_duration=20 * VT,
    clock_skew=0.0,
)
"""One job, two workers, a reaper every half second, nothing random but the scheduling."""

Handler = Callable[[str, int, int], tuple[float, bool]]


@dataclass(frozen=True)
class Schedule:
    """One pinned interleaving: a calm run, its aimed pause, and what starts during the pause."""

    name: str
    story: str
    config: SimConfig
    handler: Handler = lambda job, attempt, life: (VT / 4, False)
    racer: Callable[[World, Actor], None] | None = None
    """Started when the aimed pause begins: the actor that races the paused one."""
    setup: Callable[[World], None] | None = None
    """Runs before any actor: puts objects in the bucket (hostile ones, a dead job)."""
    expect: Callable[[World], list[str]] = field(default=lambda world: [])
    """Checks beyond the invariants; each string returned is a failure."""

    def run(self) -> tuple[Outcome, list[str]]:
        world = World(self.config, PAIL)
        world.outcomes = self.handler
        world.on_aim = self.racer
        if self.setup is not None:
            self.setup(world)
        outcome = world.run()
        return outcome, self.expect(world)


# --- scenario 3: a stalled claimer wakes after a take-over (issue 12, defect 3) ---------


def _stalled_claimer(name: str, op: str, key: str, when: str) -> Schedule:
    return Schedule(
        name,
        f"A claimer stalls {when} for four leases; the reaper fences its lease and requeues "
        "the job; the other worker claims it and runs a handler three leases long; the "
        "first wakes while that handler runs. It must not start the handler.",
        replace(CALM, aim=Aim("claim", 0, AimAction.LONG_STALL, pause=4.0, op=op, key=key)),
        handler=lambda job, attempt, life: (3 * VT, False),
        expect=_one_execution,
    )


def _one_execution(world: World) -> list[str]:
    runs = [e.label() for job in world.ledger.jobs.values() for e in job.executions]
    return [] if len(runs) == 1 else [f"expected one execution, got {runs}"]


STALLED_CLAIMER = (
    _stalled_claimer("claimer-stalls-after-lease", "DELETE", "queue/", "after its lease write"),
    _stalled_claimer("claimer-stalls-after-dequeue", "HEAD", "done/", "after deleting the entry"),
)


# --- issue 17: crashes at the overlapped requests --------------------------------------


def _overlapped_crash_then(want_outcome: str) -> Callable[[World], list[str]]:
    def expect(world: World) -> list[str]:
        failures = _one_execution(world) if want_outcome == "one" else []
        if world.counts["aimed_overlapped_crash"] != 1:
            failures.append("the crash did not strike an overlapped request")
        job = next(iter(world.ledger.jobs.values()))
        if job.outcome != "succeeded":
            failures.append(f"the job ended {job.outcome}")
        return failures

    return expect


OVERLAPPED_CRASHES = (
    Schedule(
        "crash-as-the-lease-removal-is-sent",
        "A worker writes done/ and crashes as its background DELETE of the lease is sent: "
        "the lease stays beside the outcome. The job must end once, and the reaper must "
        "remove the lease once it expires (the run is quiet only with run/ empty).",
        replace(CALM, workers=1, aim=Aim("settle", 0, AimAction.CRASH, op="DELETE", key="run/")),
        expect=_overlapped_crash_then("one"),
    ),
    Schedule(
        "crash-with-the-claims-delete-and-head-in-flight",
        "A claimer crashes as it sends the HEAD of done/ beside its DELETE of the entry: "
        "the DELETE may or may not land. The job must still end, done, once its lease "
        "expires and the reaper puts it back (or finds the entry there).",
        replace(CALM, aim=Aim("claim", 0, AimAction.CRASH, op="HEAD", key="done/")),
        expect=_overlapped_crash_then("any"),
    ),
)


# --- defect 0: a cancel racing every step of a redrive (issue 18) -----------------------

REDRIVE_REQUESTS = 6
"""``Pail.redrive(id)``: GET dlq, HEAD run, HEAD done, PUT queue, DELETE dlq, DELETE done."""


def _dies_then_succeeds(job: str, attempt: int, life: int) -> tuple[float, bool]:
    """The first life's one attempt fails (max_retries=0: dead); a redriven life succeeds."""
    return (VT / 4, life == 0)


def _cancel_once(world: World, paused: Actor) -> None:
    """Start an operator who cancels the job now, while the redrive is paused."""
    _spawn_cancel(world, delay=0.0)


def _cancel_while_owner_runs(world: World, paused: Actor) -> None:
    """The redrive is paused after its entry: a worker claims it; the cancel lands mid-run."""
    _spawn_cancel(world, delay=VT / 2)


def _spawn_cancel(world: World, delay: float) -> None:
    process = world.scheduler.new_process("canceller-race", "canceller")

    def cancel() -> None:
        world.scheduler.sleep(delay)
        job_id = next(iter(world.ledger.jobs))
        try:
            cancelled = _pail(world).cancel(job_id)
        except JobNotFoundError:
            world.ledger.note("cancel found no object: the job is between two states")
            return
        world.ledger.cancel_returned(job_id, cancelled)
        world.counts[f"cancel_{cancelled}"] += 1
        world.ledger.note(f"cancel during the redrive's pause returned {cancelled}")

    world.scheduler.spawn(process, process.name, cancel)


def _cancel_race(request: int) -> Schedule:
    return Schedule(
        f"cancel-during-redrive-request-{request}",
        f"A job dies (no retries); an operator redrives it and pauses before request "
        f"{request} of the redrive; a cancel runs to its end during the pause. If it "
        "returned True the job must end cancelled; nothing may be lost.",
        replace(
            CALM,
            workers=1,
            max_retries=0,
            redrive_budget=1,
            aim=Aim("redrive", request, AimAction.SHORT_STALL, pause=1.5),
        ),
        handler=_dies_then_succeeds,
        racer=_cancel_once,
        expect=_cancel_kept,
    )


def _cancel_kept(world: World) -> list[str]:
    job = next(iter(world.ledger.jobs.values()))
    if world.counts["cancel_True"] and job.outcome != "cancelled":
        return [f"cancel returned True and the job ended {job.outcome}"]
    if not (world.counts["cancel_True"] or world.counts["cancel_False"]):
        return ["the cancel never ran during the pause"]
    return []


CANCEL_DURING_REDRIVE = tuple(_cancel_race(k) for k in range(1, REDRIVE_REQUESTS + 1))

OWNER_COMPLETES_AFTER_CANCEL = Schedule(
    "cancel-then-redriven-owner-completes",
    "A job dies; the redrive writes its entry and deletes the record, then pauses before "
    "deleting the dead marker (two leases); a worker claims the redriven job (its handler "
    "runs one lease); the job is cancelled half a lease into the pause (cancel returns "
    "True); the redrive resumes and deletes 'the dead marker' by its ETag; the owner "
    "completes. With identical marker bytes the redrive deletes the cancellation and the "
    "job ends done: the job must end cancelled.",
    replace(
        CALM,
        workers=1,
        max_retries=0,
        redrive_budget=1,
        aim=Aim("redrive", 0, AimAction.SHORT_STALL, pause=2.0, op="DELETE", key="done/"),
    ),
    handler=lambda job, attempt, life: (VT / 4, True) if life == 0 else (VT, False),
    racer=_cancel_while_owner_runs,
    expect=_cancel_kept,
)


# --- a dead-letter written late, between a redrive's two deletes -----------------------

LATE_DEAD_LETTER = Schedule(
    "dead-letter-written-late-into-a-redrive",
    "The owner of a job with no retries left records its decision and writes the dead "
    "marker, then stalls three leases before writing the record. The reaper fences its "
    "lease and finishes the dead-letter; an operator redrives the job (pausing before its "
    "last delete); the owner wakes after the redrive and writes its record. That record "
    "belongs to a death the redrive took back: it must not outlive the run.",
    replace(
        CALM,
        workers=1,
        max_retries=0,
        redrive_budget=1,
        aim=Aim("settle", 0, AimAction.LONG_STALL, pause=3.0, op="PUT", key="dlq/"),
        more_aims=(Aim("redrive", 0, AimAction.SHORT_STALL, pause=0.7, op="DELETE", key="done/"),),
    ),
    handler=_dies_then_succeeds,
    expect=lambda world: [] if world.counts["aimed_short-stall"] else ["the redrive never paused"],
)

LATE_DEAD_LETTER_BETWEEN_DELETES = Schedule(
    "dead-letter-written-between-a-redrives-deletes",
    "As above, but the owner wakes while the redrive is paused between its delete of the "
    "record and its delete of the marker, lands its record there and crashes before it looks "
    "whether the job lives on: only the redrive's look at dlq/ after the marker is gone "
    "(redrive.clear_late_record) removes that record.",
    replace(
        LATE_DEAD_LETTER.config,
        aim=Aim("settle", 0, AimAction.LONG_STALL, pause=3.0, op="PUT", key="dlq/"),
        more_aims=(
            Aim("redrive", 0, AimAction.LONG_STALL, pause=1.5, op="DELETE", key="done/"),
            Aim("settle", 0, AimAction.CRASH, op="GET", key="queue/"),
        ),
    ),
    handler=_dies_then_succeeds,
    expect=lambda world: [] if world.counts["aimed_crash"] else ["the owner never crashed"],
)

# --- scenarios 1 and 2: hostile objects before the good jobs (issue 12, defects 1, 2) ---

HOSTILE_ENTRIES = {
    # What pailq 0.1.1 writes for a NaN payload: its json.dumps allows NaN.
    "queue/-hostile-1-nan": b'{"payload": {"x": NaN}, "attempts": 0}',
    "queue/-hostile-2-infinity": b'{"payload": Infinity, "attempts": 0}',
    "queue/-hostile-3-redriven": b'{"payload": 1, "attempts": 0, "redriven": "x"}',
    "queue/-hostile-4-error": b'{"payload": 1, "attempts": 1, "last_error": {"attempt": "two"}}',
    "queue/-hostile-5-deep": b'{"payload": ' + b"[" * 50_000 + b"]" * 50_000 + b', "attempts": 0}',
}
"""Bodies that decode as JSON but not as a valid entry; their keys sort before every job id."""

HOSTILE_LEASES = {
    "run/-hostile-1-nan": b'{"payload": {"x": NaN}, "attempts": 0}',
    "run/-hostile-2-attempts": b'{"payload": 1, "attempts": "x", "lease": "l", "owner": "o"}',
}


def _inject(objects: dict[str, bytes]) -> Callable[[World], None]:
    def setup(world: World) -> None:
        for key, body in objects.items():
            world.store.put(key, body)  # outside any actor: applied at once, no fault

    return setup


def _actors_alive_and_jobs_done(world: World) -> list[str]:
    done = sum(1 for job in world.ledger.jobs.values() if job.outcome == "succeeded")
    want = world.config.jobs
    return [] if done == want else [f"{done} of {want} good jobs done"]


HOSTILE_QUEUE_ENTRIES = Schedule(
    "hostile-entries-before-the-good-jobs",
    "Five hostile entries (pailq 0.1.1's NaN, Infinity, wrong types, 50,000-deep nesting) "
    "sort before two good jobs; two workers must finish both good jobs, no worker loop dying.",
    replace(CALM, jobs=2),
    setup=_inject(HOSTILE_ENTRIES),
    expect=_actors_alive_and_jobs_done,
)

HOSTILE_LEASES_BEFORE_A_DEAD_WORKERS_JOB = Schedule(
    "hostile-leases-before-a-dead-workers-job",
    "Two hostile leases (pailq 0.1.1's NaN, attempts 'x') sort before the lease of a worker "
    "that crashes before settling its job; the reaper must reap past them, and the job ends.",
    replace(CALM, jobs=1, aim=Aim("settle", 1, AimAction.CRASH)),
    setup=_inject(HOSTILE_LEASES),
    expect=_actors_alive_and_jobs_done,
)

HOSTILE = (HOSTILE_QUEUE_ENTRIES, HOSTILE_LEASES_BEFORE_A_DEAD_WORKERS_JOB)

ALL = (
    *STALLED_CLAIMER,
    *OVERLAPPED_CRASHES,
    *CANCEL_DURING_REDRIVE,
    OWNER_COMPLETES_AFTER_CANCEL,
    LATE_DEAD_LETTER,
    LATE_DEAD_LETTER_BETWEEN_DELETES,
    *HOSTILE,
)


def _pail(world: World) -> Pail:
    config = world.config
    return Pail(
        world.store, visibility_timeout=config.visibility_timeout, max_retries=config.max_retries
    )


def describe(outcome: Outcome, failures: list[str]) -> str:
    """A failing schedule's report: its own failures first, then the run's."""
    return "\n".join([*failures, outcome.report()])
