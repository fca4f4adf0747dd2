"""pailq 0.1.1's producer example: enqueue a report job, then poll its result every 2 s."""

import os
import time

from pail import Pail

BUCKET = os.environ["BUCKET"]

pail = Pail.connect(BUCKET)
job_id = pail.enqueue({"report_id": "q2_revenue", "format": "pdf"})
print(f"enqueued {job_id}", flush=True)

while (result := pail.result(job_id)) is None:
    time.sleep(2)
print(result)
