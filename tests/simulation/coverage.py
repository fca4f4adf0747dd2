"""Fault coverage measured on what struck: the aimed family, one (phase, request, action) at a time.

Each seed of the sweep draws one aimed fault (``harness.Aim``): a long
stall, a short one or a crash before request 1 to 9 of one transition. A
draw proves nothing; only a fault that *struck* does (``World._strike``
counts it under ``harness.struck_key``). The main sweep strikes most
triples, but a transition it rarely runs (a promotion: its producer
enqueues no delayed job) or a request a transition reaches only through a
retried try (the 7th request of a cancel) is struck rarely or never.

The aimed family closes that gap, honestly: for one triple, a seed's run is
the main sweep's run of that seed with its aim set to the triple (hitting
up to three times), with the operators on and faults dense enough (every
try 40% likely to fail, five tries per call) that a transition's later
requests, its clients' retries, happen. A promotion's triples run the
features model (``features.py``), whose producer enqueues delayed jobs; a
renewal's later requests are scripted retries (``_renewals_retried``).
Every invariant is checked in each run as in the sweep.

``test_coverage.py`` asserts that every triple struck; ``scripts/simulate
--aim PHASE,REQUEST,ACTION --seed S`` replays one aimed run.
"""

from __future__ import annotations

from dataclasses import replace

from tests.simulation.harness import Aim, AimAction, Outcome, SimConfig, World, struck_key
from tests.simulation.scheduler import Actor
from tests.simulation.sim_store import Fault, FaultRates, Script

Triple = tuple[str, int, str]

DENSE = FaultRates(transient=0.25, conflict=0.05, timeout_after_apply=0.1, attempts=5)
"""Faults on four tries in ten: the later requests of a transition are its retried tries."""
SEARCH = 40
"""Seeds the aimed family tries per triple before the triple counts as never struck."""


def aimed_config(seed: int, triple: Triple) -> SimConfig:
    """Seed ``seed``'s run with its aim set to ``triple``, and what that transition needs to run."""
    phase, request, action = triple
    config = SimConfig.for_seed(seed)
    return replace(
        config,
        aim=Aim(phase, request, AimAction(action), hits=3),
        faults=DENSE,
        # Dead jobs to redrive, jobs to cancel and status to read; handlers long enough to renew.
        max_retries=config.max_retries if phase not in ("redrive", "cancel") else 0,
        fail_probability=max(config.fail_probability, 0.5),
        long_handler_probability=max(config.long_handler_probability, 0.3),
        redrive_budget=max(config.redrive_budget, 1),
        cancel_share=max(config.cancel_share, 0.6),
    )


def run_aimed_seed(seed: int, triple: Triple) -> Outcome:
    """The run of ``seed`` aimed at ``triple`` (module docstring); the same pair replays it."""
    config = aimed_config(seed, triple)
    if triple[0] == "promote":
        from tests.simulation.features import run_feature_seed

        return replace(run_feature_seed(seed, config=config), replay_flags=aim_flag(triple))
    world = World(config)
    world.replay_flags = aim_flag(triple)
    if triple[0] == "renew":
        world.store.script = _renewals_retried(world)
    return world.run()


def aim_flag(triple: Triple) -> str:
    """``scripts/simulate``'s flag for the aimed run of ``triple``."""
    phase, request, action = triple
    return f" --aim {phase},{request},{action}"


def parse_aim(text: str) -> Triple:
    """``phase,request,action`` (``--aim``) as a triple; ``ValueError`` naming what is wrong."""
    from tests.simulation.harness import triples

    parts = text.split(",")
    if len(parts) != 3 or not parts[1].isdigit():
        raise ValueError(f"--aim takes phase,request,action (like claim,3,crash), got {text!r}")
    triple = (parts[0], int(parts[1]), parts[2])
    if triple not in triples():
        raise ValueError(f"--aim {text!r} names no triple of the sweep (harness.triples)")
    return triple


def _renewals_retried(world: World) -> Script:
    """Every renewal under chaos as long as a client's retries make it: ten requests.

    A renewal is one ``PUT`` (``If-Match``); its later requests are its
    tries. Tries 1 to 3 get a 5xx, try 4 lands and its response is lost,
    try 5 meets a 412 on its own write, so the client reads the lease back
    (``put_conditional``'s ``HEAD``), which gets a 5xx four times: requests
    6 to 10 of the renewal. Random faults reach a renewal's 7th request too
    rarely to strike it.
    """

    def script(actor: Actor, op: str, key: str, attempt: int) -> Fault | None:
        if not world.chaos_on or world.phase_of(actor) != "renew":
            return None
        if op.startswith("PUT"):
            if attempt <= 3:
                return Fault.TRANSIENT
            return Fault.TIMEOUT_AFTER_APPLY if attempt == 4 else None
        return Fault.TRANSIENT if op == "HEAD" and attempt <= 4 else None

    return script


def first_strike(triple: Triple, seeds: int = SEARCH) -> tuple[int | None, list[Outcome]]:
    """The first seed whose aimed run struck ``triple``, and every run that failed on the way."""
    key = struck_key(*triple)
    failed = []
    for seed in range(seeds):
        outcome = run_aimed_seed(seed, triple)
        if outcome.failed:
            failed.append(outcome)
        if outcome.counts[key]:
            return seed, failed
    return None, failed
