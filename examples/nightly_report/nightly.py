"""The nightly report: at 02:00, export each of 40 regions, then merge them into one report.

One handler, ``run``, serves the three kinds of job the report is made of:

* ``{"step": "plan", "date": ...}``: what the 02:00 schedule enqueues. It fans
  out one export job per region and a merge job that waits for all of them
  (``current_job().fan_out``): the children and the continuation are written
  so that a crash between them leaves neither a merge that waits forever nor
  exports without their merge.
* ``{"step": "export", "region": ..., "date": ...}``: one region's figures
  (made up here from the region's name, so a run is reproducible).
* ``{"step": "merge", "date": ...}``: runs once every export succeeded, reads
  their 40 results (``current_job().dependencies``) and builds the report: a
  text document (``text``) and its totals, returned as the job's result.

``schedule(pail)`` makes the 02:00 schedule. ``run_api.py`` and
``walkthrough.sh`` run it all on the local S3 server (see ``README.md``).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from pail import Pail, current_job
from pail.ids import ulid_time

REGIONS = tuple(
    f"{area}-{n}"
    for area in ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
    for n in range(1, 9)
)
"""40 regions."""
SCHEDULE = "nightly-report"
CRON = "0 2 * * *"
PLAN = {"step": "plan"}
"""The payload the 02:00 tick enqueues."""


def schedule(pail: Pail, *, timezone: str = "UTC") -> None:
    """Make (or keep) the 02:00 schedule: each night's tick enqueues one plan job."""
    pail.schedule(SCHEDULE, PLAN, cron=CRON, timezone=timezone)


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """The job function of every step (``pail work --handler nightly:run``)."""
    step = payload.get("step")
    if step == "plan":
        return _plan(payload)
    if step == "export":
        return export(payload["region"], payload["date"])
    if step == "merge":
        return _merge(payload)
    raise ValueError(f"unknown step {step!r}")


def _plan(payload: dict[str, Any]) -> dict[str, Any]:
    job = current_job()
    assert job is not None, "a plan runs as a job"
    # The night's report covers the day before its tick (the job id's time: a retry agrees).
    enqueued = ulid_time(job.message.id) or datetime.now(UTC)
    date = payload.get("date") or (enqueued.date() - timedelta(days=1)).isoformat()
    flow = job.fan_out(
        [{"step": "export", "region": region, "date": date} for region in REGIONS],
        then={"step": "merge", "date": date},
    )
    return {"date": date, "exports": list(flow.children), "merge": flow.then}


def export(region: str, date: str) -> dict[str, Any]:
    """One region's figures for ``date``: orders and revenue (reproducible stand-ins)."""
    digest = hashlib.sha256(f"{region}/{date}".encode()).digest()
    orders = 100 + int.from_bytes(digest[:2], "big") % 900
    revenue = round(orders * (20 + digest[2] % 80) + digest[3] / 100, 2)
    return {"region": region, "date": date, "orders": orders, "revenue": revenue}


def _merge(payload: dict[str, Any]) -> dict[str, Any]:
    job = current_job()
    assert job is not None, "a merge runs as a job"
    # Its dependencies are the 40 exports and the plan that made them (a merge that fanned out
    # from a handler waits for that handler too): the exports are the results with a region.
    exports = sorted(
        (r for r in job.dependencies.values() if isinstance(r, dict) and "region" in r),
        key=lambda r: r["region"],
    )
    return merge(payload["date"], exports)


def merge(date: str, exports: list[dict[str, Any]]) -> dict[str, Any]:
    """The report of ``date`` from every region's export: its text and its totals."""
    orders = sum(e["orders"] for e in exports)
    revenue = round(sum(e["revenue"] for e in exports), 2)
    width = max(len(e["region"]) for e in exports) if exports else 6
    lines = [
        f"Nightly report, {date}",
        "=" * 40,
        f"{'region':<{width}}  {'orders':>7}  {'revenue':>12}",
        *(f"{e['region']:<{width}}  {e['orders']:>7}  {e['revenue']:>12,.2f}" for e in exports),
        "-" * 40,
        f"{'total':<{width}}  {orders:>7}  {revenue:>12,.2f}",
        f"{len(exports)} regions",
    ]
    return {
        "date": date,
        "regions": len(exports),
        "orders": orders,
        "revenue": revenue,
        "text": "\n".join(lines) + "\n",
    }
