"""The demo's jobs: a batch of reports and simulations, and the handler that runs them.

The handler is an ordinary pail handler (``payload -> result``), so it also
runs under ``pail work --handler pail.demo.jobs:handle``. Three kinds of job
misbehave on purpose:

- a *flaky* report reads from a warehouse replica that times out on its
  first attempts (``"replica_timeouts": n``), then succeeds: a retry saves it;
- the *poison* report asks for a source that was retired: it fails on every
  attempt and ends in the dead-letter queue with its error;
- the *long* simulation runs for seconds, long enough for the demo to kill
  its worker mid-job and show the reaper reclaiming the lease.

A job's payload is the same on every attempt, so a flaky job counts its
attempts in a ledger directory (one file per attempt, created exclusively,
so concurrent workers never double-count). Without a ledger, as under
``pail work``, flaky jobs simply succeed.
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RETIRED_SOURCE = "ledger_v1"
LONG_SCENARIO = "market_crash"
_REGIONS = ("emea", "apac", "amer", "latam")
_METRICS = ("revenue", "churn", "margin", "cohorts", "inventory")
_SCENARIOS = ("rate_hike", "supply_shock", "bull_run", "stagflation")
_STEP_SECONDS = 0.01


class WarehouseTimeoutError(ConnectionError):
    """A (simulated) transient failure: the warehouse replica did not answer in time."""


class RetiredSourceError(ValueError):
    """A (simulated) permanent failure: the job asks for data that no longer exists."""


@dataclass(frozen=True, slots=True)
class Batch:
    """The demo's jobs, in enqueue order, with the indexes of the special ones."""

    payloads: list[dict[str, Any]]
    long: int
    poison: int
    flaky: tuple[int, ...]


def build_batch(total: int = 200, *, flaky: int = 5, seed: int = 7) -> Batch:
    """``total`` jobs: reports and simulations, ``flaky`` transient failures, one poison, one long.

    >>> batch = build_batch(20, flaky=2)
    >>> len(batch.payloads), batch.payloads[batch.poison]["source"]
    (20, 'ledger_v1')
    """
    if total < 3 + flaky:
        raise ValueError(f"a demo batch needs at least {3 + flaky} jobs, got {total}")
    rng = random.Random(seed)
    payloads: list[dict[str, Any]] = [
        # First in the queue, so it is claimed early and the kill lands mid-batch.
        {"kind": "simulation", "scenario": LONG_SCENARIO, "agents": 10_000, "steps": 500, "seed": 1}
    ]
    for n in range(1, total):
        if n % 3 == 0:
            payloads.append(
                {
                    "kind": "simulation",
                    "scenario": rng.choice(_SCENARIOS),
                    "agents": rng.choice((500, 1_000, 2_000, 5_000)),
                    "steps": rng.randint(5, 20),
                    "seed": n,
                }
            )
        else:
            period = f"{2024 + n % 2}q{n % 4 + 1}"
            payloads.append(
                {
                    "kind": "report",
                    "report_id": f"{rng.choice(_REGIONS)}_{rng.choice(_METRICS)}_{period}_{n:03d}",
                    "format": rng.choice(("pdf", "csv", "xlsx")),
                    "rows": rng.randint(1_000, 90_000),
                }
            )
    reports = [i for i, p in enumerate(payloads) if p["kind"] == "report"]
    chosen = rng.sample(reports, flaky + 1)
    poison, flaky_ones = chosen[0], tuple(sorted(chosen[1:]))
    payloads[poison] = {
        "kind": "report",
        "report_id": "fy2023_restated",
        "format": "pdf",
        "rows": 1,
        "source": RETIRED_SOURCE,
    }
    for i in flaky_ones:
        payloads[i] = {**payloads[i], "replica_timeouts": 2}
    return Batch(payloads, long=0, poison=poison, flaky=flaky_ones)


def handle(payload: dict[str, Any], *, ledger: Path | None = None) -> dict[str, Any]:
    """Run one demo job and return its result.

    >>> handle({"kind": "report", "report_id": "q2", "format": "pdf", "rows": 10})["url"]
    'reports/q2.pdf'
    """
    if payload.get("kind") == "simulation":
        return _simulate(payload)
    return _report(payload, ledger)


def _report(payload: dict[str, Any], ledger: Path | None) -> dict[str, Any]:
    report_id = str(payload["report_id"])
    if payload.get("source") == RETIRED_SOURCE:
        raise RetiredSourceError(
            f"report {report_id}: source {RETIRED_SOURCE!r} was retired; "
            "no data can be read for this report"
        )
    timeouts = int(payload.get("replica_timeouts", 0))
    if timeouts and ledger is not None:
        attempt = record_attempt(ledger, report_id)
        if attempt <= timeouts:
            raise WarehouseTimeoutError(
                f"report {report_id}: warehouse replica timed out after 30 s (attempt {attempt})"
            )
    rows = int(payload.get("rows", 1_000))
    time.sleep(0.02 + rows / 1_000_000)  # the query and the rendering
    fmt = payload.get("format", "pdf")
    return {
        "report_id": report_id,
        "url": f"reports/{report_id}.{fmt}",
        "rows": rows,
        "pages": max(1, rows // 2_500),
    }


def _simulate(payload: dict[str, Any]) -> dict[str, Any]:
    steps = int(payload.get("steps", 10))
    agents = int(payload.get("agents", 1_000))
    rng = random.Random(payload.get("seed", 0))
    price, prices = 100.0, []
    drift = -0.004 if payload.get("scenario") == LONG_SCENARIO else 0.0005
    for _ in range(steps):
        time.sleep(_STEP_SECONDS)  # one market step for every agent
        price *= math.exp(drift + rng.gauss(0, 0.02))
        prices.append(price)
    ordered = sorted(prices)
    return {
        "scenario": payload.get("scenario"),
        "agents": agents,
        "steps": steps,
        "price": round(price, 2),
        "var_95": round(100.0 - ordered[max(0, len(ordered) // 20 - 1)], 2),
    }


def record_attempt(ledger: Path, name: str) -> int:
    """Record one more attempt of ``name`` in ``ledger``; return its number (1-based).

    Each attempt is a file ``{name}.{n}`` created with ``O_EXCL``, so two
    processes never take the same number.
    """
    ledger.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while True:
        try:
            os.close(os.open(ledger / f"{name}.{attempt}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            attempt += 1
            continue
        return attempt


def ledger_attempts(ledger: Path) -> dict[str, int]:
    """How many attempts each flaky job has recorded in ``ledger`` so far."""
    counts: dict[str, int] = {}
    if ledger.is_dir():
        for path in ledger.iterdir():
            name, _, _ = path.name.rpartition(".")
            counts[name] = counts.get(name, 0) + 1
    return counts
