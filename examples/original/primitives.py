"""The raw primitives: claim a job, then complete or fail it yourself."""

import os
import time

from _report import build_report

from pail import Pail

IDLE_SECONDS = float(os.environ.get("IDLE_SECONDS", "5"))

pail = Pail.connect(os.environ["BUCKET"])
while True:
    message = pail.claim()
    if message is None:
        time.sleep(IDLE_SECONDS)
        continue
    print(f"claimed {message.id}", flush=True)
    try:
        result = build_report(message.payload)
    except Exception as exc:  # noqa: BLE001 - any failure goes back to the queue
        message.fail(exc)
        print(f"failed {message.id}: {exc!r}", flush=True)
    else:
        message.complete(result)
        print(f"completed {message.id}", flush=True)
