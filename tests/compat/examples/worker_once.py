"""pailq 0.1.1's one-shot worker example: process one job and exit."""

import os
import time
from typing import Any

from pail import Pail

BUCKET = os.environ["BUCKET"]


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(2)
    return {"report_id": payload["report_id"], "url": f"reports/{payload['report_id']}.pdf"}


pail = Pail.connect(BUCKET)
if pail.work_once(build_report):
    print("processed one job, exiting")
else:
    print("queue empty, nothing to do")
