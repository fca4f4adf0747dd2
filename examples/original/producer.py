"""Enqueue a report and wait for its result."""

import os
import time

from pail import Pail

BUCKET = os.environ["BUCKET"]
POLL_SECONDS = float(os.environ.get("POLL_SECONDS", "2"))

pail = Pail.connect(BUCKET)
job_id = pail.enqueue({"report_id": "q2_revenue", "format": "pdf"})
print(f"enqueued {job_id}", flush=True)

while (result := pail.result(job_id)) is None:
    time.sleep(POLL_SECONDS)
print(f"result: {result}")
