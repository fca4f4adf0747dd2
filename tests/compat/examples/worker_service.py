"""pailq 0.1.1's long-running worker example: ``work()`` forever."""

import os
import signal
import time
from typing import Any

from pail import Pail

BUCKET = os.environ["BUCKET"]
signal.signal(signal.SIGINT, signal.SIG_DFL)  # the test's addition: a background run ignores it


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(2)
    return {"report_id": payload["report_id"], "url": f"reports/{payload['report_id']}.pdf"}


pail = Pail.connect(BUCKET)
pail.work(build_report)
