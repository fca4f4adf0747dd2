"""Deterministic simulation of pail's protocol: many seeds, regressions, and the known-bad model.

Its workers run the job loop as shipped (``worker.py``: ``pail.drain``,
``Message``, ``Heartbeat``, ``settle`` with ``release``).
``harness.py`` explains a run; ``invariants.py`` what is checked. The sweep
runs ``PAIL_SIM_SEEDS`` seeds (10,000 by default) on ``PAIL_SIM_PROCESSES``
processes (2) and
prints its figures; any failing seed's report (with its trace and the
command that replays it) is in the assertion message.
"""

from __future__ import annotations

import datetime
import inspect
import os
import random
from collections.abc import Callable

import pytest

from pail.codec import Envelope, ErrorInfo, LeaseRecord
from pail.keys import Keys
from pail.protocol import settle, transitions
from pail.protocol.claim import Claimer
from pail.queue import Pail
from pail.store.base import Store
from pail.store.memory import MemoryStore
from tests.contract import test_store_contract
from tests.simulation import (
    schedules,
    test_dependencies_sim,
    test_hostile,
    test_limits_sim,
    test_named,
    test_ticking,
)
from tests.simulation.harness import AimAction, model_named, run_seed, struck, triples
from tests.simulation.invariants import Kind
from tests.simulation.regressions import REGRESSIONS, Regression
from tests.simulation.scheduler import Actor, Scheduler
from tests.simulation.seeds import FamilySeeds, todays
from tests.simulation.sim_store import Fault, FaultRates, Latency, NullObserver, SimStore
from tests.simulation.sweep import Sweep, sweep

SEEDS = int(os.environ.get("PAIL_SIM_SEEDS", "10000"))
PROCESSES = int(os.environ.get("PAIL_SIM_PROCESSES", "2"))
NEW_SEEDS = int(os.environ.get("PAIL_SIM_NEW_SEEDS", "1000"))
"""Seeds CI has not run before, beside the fixed ones: a range that moves every day."""
SHARDED = FamilySeeds.of("SHARDED", fixed=200, fresh=100)
"""Seeds run again on a sharded queue (2 or 4 shards) that grows mid-run (to 1x, 2x or 4x)."""
ORIGINAL_SEED_BUDGET = 100
"""The known-bad model must show each of its bugs within this many seeds."""
KNOWN_BAD_SEED_BUDGET = 100
"""The known-bad claim step 3 must show a parallel execution within this many seeds."""


def test_given_ten_thousand_seeds_when_simulated_then_every_invariant_holds() -> None:
    result = sweep(range(SEEDS), processes=PROCESSES)

    print(f"\nsimulation: {result.summary()}")
    hit = struck(result.counts) & triples()
    print(f"  aimed faults struck {len(hit)} of {len(triples())} triples (test_coverage: all)")
    assert result.seeds == SEEDS
    counts = result.counts
    assert counts["crashes"] > 0 and counts["stalls_long"] > 0 and counts["stalls_short"] > 0
    assert all(result.faults[fault] > 0 for fault in Fault)
    # Every kind of aimed fault struck, and the operators really redrove and cancelled.
    assert all(counts[f"aimed_{action}"] > 0 for action in AimAction)
    assert counts["redrives"] > 0 and counts["cancels"] > 0 and counts["status_reads"] > 0
    # Issue 17's order: the lease removals went to the background, and aimed crashes and
    # stalls struck overlapped requests (the claim's concurrent DELETE or HEAD, a removal).
    assert counts["background_requests"] > 0
    assert all(counts[f"aimed_overlapped_{action}"] > 0 for action in AimAction)
    # Schedules are in the whole model: some worlds ticked (tests/simulation/ticking.py).
    assert counts["tick_jobs"] > 0 and counts["tick_passes"] > 0
    # Rate limits are in the whole model: some limits worlds started under a rate (``limits.py``).
    assert counts["rate_tokens"] > 0
    # The workers are the shipped drain: it settled every way, released jobs on a stop request
    # mid-handler (the attempt spent) and returned jobs claimed too late (the attempt kept).
    print(
        f"  drain: {counts['drain_succeeded']} succeeded, {counts['drain_failed']} failed, "
        f"{counts['drain_released']} released (SIGTERM mid-handler), {counts['drain_returned']} "
        f"returned unstarted, {counts['drain_unrecorded']} unrecorded; "
        f"{counts['drain_returns']} drains ended"
    )
    assert counts["drain_succeeded"] > 0 and counts["drain_failed"] > 0
    assert counts["drain_released"] > 0 and counts["drain_returned"] > 0
    assert counts["heartbeat_delays"] > 0
    assert not result.kinds, failed(result)


def new_seeds(today: datetime.date | None = None) -> range:
    """Today's new seeds for the main sweep: ``seeds.todays`` (``PAIL_SIM_NEW_SEED_START``)."""
    return todays(NEW_SEEDS, today)


def failed(result: Sweep, flags: str = "") -> str:
    """The failing seeds, the command that replays each, and the first reports."""
    replays = [f"scripts/simulate --seed {seed}{flags}" for seed in result.failed_seeds[:10]]
    return "\n".join(
        [f"failed seeds: {result.failed_seeds[:50]}", *replays, "", *result.failures[:3]]
    )


def test_given_new_seeds_today_when_simulated_then_every_invariant_holds() -> None:
    """Seeds CI never ran, beside the fixed 10,000: a bug the fixed ones miss may show here."""
    seeds = new_seeds()
    print(f"\nnew seeds today: {seeds.start} to {seeds.stop - 1} (PAIL_SIM_NEW_SEED_START)")
    result = sweep(seeds, processes=PROCESSES)

    print(f"simulation, new seeds: {result.summary()}")
    assert result.seeds == len(seeds)
    assert not result.kinds, failed(result)


def test_given_two_days_then_their_new_seeds_differ_and_miss_the_fixed_sweep() -> None:
    first, second = new_seeds(datetime.date(2026, 12, 1)), new_seeds(datetime.date(2026, 12, 2))

    assert first.stop == second.start and len(first) == NEW_SEEDS
    assert first.start >= SEEDS


def test_given_sharded_queues_that_grow_when_simulated_then_every_invariant_holds() -> None:
    result = sweep(SHARDED.ranges, processes=PROCESSES, sharded=True)

    print(f"\nsimulation, sharded and growing ({SHARDED}): {result.summary()}")
    assert result.seeds == len(SHARDED)
    counts = result.counts
    # The queue grew mid-run, old workers took the new count, and the chaos was real.
    assert counts["shard_growths"] > 0 and counts["shard_rollouts"] > 0
    assert counts["crashes"] > 0 and counts["redrives"] > 0 and counts["cancels"] > 0
    assert not result.kinds, failed(result, " --sharded")


def test_given_the_old_claim_step_three_when_simulated_then_a_parallel_execution_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The known-bad step-3 variant (issue 12, defect 3) must be caught, as the original is."""
    regression = next(r for r in REGRESSIONS if r.name == "stalled-claimer-runs-in-parallel")
    regression.restore_bug(monkeypatch)

    found = [s for s in range(KNOWN_BAD_SEED_BUDGET) if Kind.PARALLEL in run_seed(s).kinds()]

    assert found, f"no parallel execution in {KNOWN_BAD_SEED_BUDGET} seeds"
    print(
        f"\nold claim step 3: parallel execution in {len(found)}/{KNOWN_BAD_SEED_BUDGET} seeds, "
        f"first {found[0]}"
    )
    detail = next(v.detail for v in run_seed(found[0]).violations if v.kind is Kind.PARALLEL)
    assert "started" in detail  # caught at the handler's start, not as a statistic


@pytest.mark.parametrize("regression", REGRESSIONS, ids=lambda r: r.name)
def test_given_a_known_bad_variant_when_simulated_then_its_invariant_breaks(
    regression: Regression, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hard check: the fix passes the seed, and the variant breaks its invariant in a bounded search."""
    if regression.seed is None:
        _assert_the_schedule_catches(regression, monkeypatch)
        return
    after = regression.run(regression.seed)
    assert not after.failed, after.report()

    caught = _first_caught(regression, monkeypatch)

    assert caught is not None, (
        f"{regression.name}: with the variant in, neither seed {regression.seed} nor any of the "
        f"first {regression.search} seeds of the {regression.family} family breaks "
        f"{regression.breaks}: the simulation no longer sees this bug. Find a seed that does "
        f"(scripts/simulate --known-bad {regression.name} --seeds 100000) and record it, or pin "
        "the bug by a schedule (tests/simulation/schedules.py)"
    )
    if caught != regression.seed:
        print(f"\n{regression.name}: seed {regression.seed} no longer reaches it, {caught} does")


def _assert_the_schedule_catches(regression: Regression, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variant no seed reaches often enough: its schedule passes, and fails with the variant in."""
    (schedule,) = [s for s in schedules.ALL if s.name == regression.schedule]
    outcome, failures = schedule.run()
    assert not outcome.failed and not failures, schedules.describe(outcome, failures)

    regression.restore_bug(monkeypatch)
    broken, _ = schedule.run()

    assert regression.breaks in broken.kinds(), (
        f"{regression.name}: with the variant in, schedule {schedule.name} no longer breaks "
        f"{regression.breaks}\n{broken.report()}"
    )


def _first_caught(regression: Regression, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """The recorded seed if it still breaks, else the first of the family's first ``search``."""
    assert regression.seed is not None
    regression.restore_bug(monkeypatch)
    try:
        seeds: list[int] = [regression.seed, *range(regression.search)]
        for seed in seeds:
            if regression.breaks in regression.run(seed).kinds():
                return seed
        return None
    finally:
        monkeypatch.undo()


KNOWN_BAD_ELSEWHERE: dict[Kind, Callable[..., None]] = {
    Kind.FOREIGN: test_hostile.test_given_a_claimer_that_passes_foreign_entries_by_when_simulated_then_it_is_caught,
    Kind.NAMED_WAKE: test_named.test_given_a_drain_that_lists_after_winning_nothing_when_simulated_then_it_is_caught,
    Kind.TICK: test_ticking.test_given_a_tick_without_its_dedup_in_the_main_sweep_then_it_is_caught,
    Kind.DEPENDENCY: test_dependencies_sim.test_given_a_promotion_before_the_last_dependency_in_the_main_sweep_then_it_is_caught,
    Kind.LIMIT: test_limits_sim.test_given_a_recovery_that_frees_a_slot_without_its_fence_then_a_live_handler_is_caught,
    Kind.SLOT_LOST: test_limits_sim.test_given_a_reaper_that_recovers_no_slot_then_a_lost_slot_is_caught,
    Kind.RATE: test_limits_sim.test_given_a_start_token_written_without_its_condition_then_a_shared_token_is_caught,
}
"""Kinds whose known-bad variant runs in a family of its own (its test asserts it is caught)."""


def test_given_every_invariant_kind_then_a_known_bad_variant_breaks_it() -> None:
    """Each kind the ledger checks has a variant that the suite fails on when it is not caught."""
    covered = {r.breaks for r in REGRESSIONS} | set(KNOWN_BAD_ELSEWHERE)

    assert covered == set(Kind), sorted(set(Kind) - covered)
    assert len({r.name for r in REGRESSIONS}) == len(REGRESSIONS)


def test_given_same_seed_when_run_twice_then_the_run_is_identical() -> None:
    first, second = run_seed(4242), run_seed(4242)

    assert (first.steps, first.sim_time, first.counts) == (
        second.steps,
        second.sim_time,
        second.counts,
    )


def test_given_original_protocol_with_crashes_when_simulated_then_a_job_is_found_stuck() -> None:
    original = model_named("original")

    stuck = [
        seed
        for seed in range(ORIGINAL_SEED_BUDGET)
        if Kind.STUCK in run_seed(seed, original).kinds()
    ]

    assert stuck, f"no stuck job in {ORIGINAL_SEED_BUDGET} seeds"
    example = run_seed(stuck[0], original)
    detail = next(v.detail for v in example.violations if v.kind is Kind.STUCK)
    print(
        f"\noriginal model: stuck job in {len(stuck)}/{ORIGINAL_SEED_BUDGET} seeds, first {stuck[0]}"
    )
    assert "queue" in detail and "run" in detail  # the queue/ + run/ pair every claim 412s on


def test_given_original_protocol_without_any_fault_when_simulated_then_it_runs_a_finished_job_again() -> (
    None
):
    original = model_named("original")

    found = []
    for seed in range(ORIGINAL_SEED_BUDGET * 3):
        outcome = run_seed(seed, original, chaos=False)
        if outcome.counts["stale_listing_double_runs"]:
            found.append(outcome)
            break

    assert found, f"no stale-listing double run in {ORIGINAL_SEED_BUDGET * 3} calm seeds"
    outcome = found[0]
    print(f"\noriginal model: stale-listing double run at calm seed {outcome.seed}")
    assert outcome.counts["crashes"] == outcome.counts["stalls"] == 0
    assert not outcome.faults
    assert {Kind.RAN_AFTER_END, Kind.RESULT_CHANGED} <= outcome.kinds()


def test_given_pail_without_any_fault_when_simulated_then_no_invariant_breaks() -> None:
    result = sweep(range(500), chaos=False, processes=1)

    assert not result.failed_seeds, failed(result, " --calm")
    assert not result.faults and result.counts["crashes"] == 0


# --- the enqueue whose response is lost --------------------------------------------


def test_given_enqueue_response_lost_and_job_requeued_meanwhile_when_retried_then_it_returns_the_id() -> (
    None
):
    scheduler = Scheduler()

    def lose_first_enqueue_response(actor: Actor, op: str, key: str, attempt: int) -> Fault | None:
        producing = actor.name == "producer" and op.startswith("PUT")
        return Fault.TIMEOUT_AFTER_APPLY if producing and attempt == 1 else None

    store = SimStore(
        scheduler,
        random.Random(1),
        NullObserver(),
        faults=FaultRates(attempts=3),
        latency=Latency(low=0.01, high=0.01, tail_probability=0.0, response_timeout=1.0),
        script=lose_first_enqueue_response,
    )
    keys = Keys()
    pail = Pail(store, visibility_timeout=30.0)
    enqueued: list[str] = []

    def producer() -> None:
        enqueued.append(pail.enqueue({"report": 7}))

    def worker_that_fails_the_job() -> None:
        clock = scheduler.clock(worker_process)
        claimer = Claimer(store, keys, visibility_timeout=30.0, clock=clock, owner="w")
        lease = claimer.claim()
        assert lease is not None
        policy = settle.Policy(3, 30.0)
        settle.fail(store, keys, lease, ErrorInfo("Boom", "first attempt"), policy)

    scheduler.spawn(scheduler.new_process("producer", "producer"), "producer", producer)
    worker_process = scheduler.new_process("worker", "worker")
    scheduler.spawn(worker_process, "worker", worker_that_fails_the_job, delay=0.1)
    scheduler.run(lambda: False, max_steps=1_000)

    (job_id,) = enqueued
    pending = store.peek(keys.queue(job_id))
    assert pending is not None and Envelope.decode(pending.body).attempts == 1
    assert pail.write_stats.by_reason.get("enqueue") == 1  # the retry lost to the requeued entry


# --- the simulated store honours the storage contract ---------------------------------

_CONTRACT = [
    fn
    for name, fn in inspect.getmembers(test_store_contract, inspect.isfunction)
    if name.startswith("test_")
    and "racing" not in name
    and list(inspect.signature(fn).parameters) == ["store"]
]


@pytest.mark.parametrize("contract_test", _CONTRACT, ids=lambda fn: fn.__name__[len("test_") :])
def test_given_simulated_store_with_retried_faults_then_it_passes_the_storage_contract(
    contract_test: Callable[[Store], None],
) -> None:
    scheduler = Scheduler()
    store = SimStore(
        scheduler,
        random.Random(contract_test.__name__),
        NullObserver(),
        # Faults a client retries (not applied), so the store's answers must be exact.
        faults=FaultRates(transient=0.2, conflict=0.2, attempts=50),
    )
    process = scheduler.new_process("contract", "worker")
    finished: list[bool] = []

    def run_contract_test() -> None:
        contract_test(store)
        finished.append(True)

    scheduler.spawn(process, "contract", run_contract_test)

    scheduler.run(lambda: False, max_steps=100_000)

    assert finished == [True]
    assert store.injected[Fault.TRANSIENT] + store.injected[Fault.CONFLICT] > 0 or (
        store.requests < 5
    )


# --- the requeue fix, scripted (its seed is rare: these pin the behaviour itself) ----------


def _lease_and_entry(entry: Envelope) -> tuple[MemoryStore, Keys, LeaseRecord, str]:
    store, keys = MemoryStore("jobs"), Keys()
    record = LeaseRecord("J", {"n": 1}, attempt=2, owner="w", lease="l", state="retrying")
    etag = store.put(keys.run("J"), record.encode()).etag
    store.put(keys.queue("J"), entry.encode())
    return store, keys, record, etag


def test_given_stale_entry_with_fewer_attempts_when_requeued_then_it_is_replaced() -> None:
    store, keys, record, etag = _lease_and_entry(Envelope(payload={"n": 1}, attempts=0))

    transitions.requeue(store, keys, record, etag, attempts=2, error=None)

    pending = store.get(keys.queue("J"))
    assert pending is not None and Envelope.decode(pending.body).attempts == 2
    assert store.get(keys.run("J")) is None


def test_given_entry_marked_cancelled_when_requeued_then_it_is_kept() -> None:
    cancelled = Envelope(payload={"n": 1}, attempts=0, cancelled=True)
    store, keys, record, etag = _lease_and_entry(cancelled)

    transitions.requeue(store, keys, record, etag, attempts=2, error=None)

    pending = store.get(keys.queue("J"))
    assert pending is not None and Envelope.decode(pending.body).cancelled
