"""pailq 0.1.1's retries example: a job that always fails ends in the DLQ after 1 + 3 attempts."""

import os
from typing import Any

from pail import Pail

BUCKET = os.environ["BUCKET"]
runs = 0


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    global runs
    runs += 1
    raise RuntimeError("the report service is down")


pail = Pail.connect(BUCKET, max_retries=3)
pail.enqueue({"report_id": "q2_revenue"})
while pail.work_once(build_report):
    pass
print(f"handler ran {runs} times")
print(f"DLQ depth: {pail.stats().failed}")
