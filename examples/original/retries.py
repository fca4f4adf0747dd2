"""A job that always fails: 1 run + 3 retries, then the dead-letter queue."""

import os

from pail import Pail

pail = Pail.connect(os.environ["BUCKET"], max_retries=3)
pail.enqueue({"report_id": "broken"})


def build_report(payload: dict[str, str]) -> dict[str, str]:
    print(f"rendering {payload['report_id']}", flush=True)
    raise RuntimeError("the renderer crashed")


while pail.work_once(build_report):
    pass
print(f"dead-lettered: {pail.stats().failed}")
