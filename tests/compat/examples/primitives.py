"""pailq 0.1.1's primitives example: claim, run, complete or fail, in a loop."""

import os
import time
from typing import Any

from pail import Pail

BUCKET = os.environ["BUCKET"]
ROUNDS = int(os.environ.get("ROUNDS", "3"))  # the test's addition: the original loops forever


def build_report(payload: dict[str, Any]) -> dict[str, Any]:
    if payload.get("fail"):
        raise ValueError("cannot build this report")
    return {"report_id": payload["report_id"]}


pail = Pail.connect(BUCKET)
for _ in range(ROUNDS):
    message = pail.claim()
    if message is None:
        time.sleep(5)
        continue
    print(f"claimed {message.id}", flush=True)
    try:
        result = build_report(message.payload)
    except Exception:  # noqa: BLE001 - as the original: any exception fails the job
        message.fail()
        print(f"failed {message.id}", flush=True)
    else:
        message.complete(result)
        print(f"completed {message.id}", flush=True)
