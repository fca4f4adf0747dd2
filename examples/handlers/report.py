"""An example pail job: build a sales report from the rows in its payload.

Deployed as-is by the CDK example app: the worker Lambda's handler is
``report.handler``, the Fargate task runs ``pail work-once --handler report:run``.
Enqueue a job from anywhere that can write to the bucket::

    pail.enqueue({
        "report_id": "q2-revenue",
        "currency": "EUR",
        "rows": [
            {"region": "eu-west", "product": "widget", "units": 3, "amount": 120.0},
            {"region": "us-east", "product": "gadget", "units": 1, "amount": 80.5},
        ],
    })

The result, read with ``pail.result(job_id)`` or through a presigned URL,
holds totals per region and product and the top products by revenue. A long
report reports its progress as it goes (readable in ``pail.status(job_id)``)
and stops early if the worker must stop, so the job is retried elsewhere
instead of being cut off mid-way.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from pail import lambda_worker
from pail.drain import current_job

TOP_PRODUCTS = 3
PROGRESS_EVERY = 1000


class ReportError(ValueError):
    """The payload cannot make a report; retrying will not help, so fix the producer."""


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Build the report described by ``payload``; return it (stored as the job's result)."""
    report_id = _required(payload, "report_id", str)
    rows = _required(payload, "rows", list)
    currency = payload.get("currency", "EUR")
    job = current_job()
    revenue_by_region: dict[str, float] = defaultdict(float)
    revenue_by_product: dict[str, float] = defaultdict(float)
    units = 0
    for number, row in enumerate(rows, start=1):
        region, product, amount, count = _parse_row(number, row)
        revenue_by_region[region] += amount
        revenue_by_product[product] += amount
        units += count
        if job is not None and number % PROGRESS_EVERY == 0:
            if job.stopping.is_set():
                raise InterruptedError(f"worker stopping at row {number}; the job will be retried")
            job.message.progress({"rows_done": number, "rows_total": len(rows)})
    # Simulated rendering time, so the demo shows running jobs; 0 by default.
    time.sleep(float(payload.get("render_seconds", 0)))
    top = sorted(revenue_by_product.items(), key=lambda item: (-item[1], item[0]))[:TOP_PRODUCTS]
    return {
        "report_id": report_id,
        "currency": currency,
        "rows": len(rows),
        "units": units,
        "total": round(sum(revenue_by_region.values()), 2),
        "by_region": {region: round(v, 2) for region, v in sorted(revenue_by_region.items())},
        "top_products": [{"product": name, "revenue": round(v, 2)} for name, v in top],
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _required(payload: dict[str, Any], name: str, kind: type) -> Any:
    value = payload.get(name) if isinstance(payload, dict) else None
    if not isinstance(value, kind):
        raise ReportError(f"payload needs {name!r} as a {kind.__name__}, got {value!r}")
    return value


def _parse_row(number: int, row: Any) -> tuple[str, str, float, int]:
    try:
        return str(row["region"]), str(row["product"]), float(row["amount"]), int(row["units"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"row {number} is not a sales row ({exc!r}): {row!r}") from None


# The worker Lambda's handler: drains the queue with `run`, configured by PAIL_* variables.
handler = lambda_worker(run)
