"""A pailq 0.1.1 worker, as its users write one: a boto3 client, ``Pail(bucket, client)``, ``work()``.

``python -m tests.compat.worker_process ENDPOINT BUCKET VT MARKS [hold]``: serves
the queue until killed. Its handler marks each job it starts (an empty file
``MARKS/{pid}-{n}``) so the test sees who runs what; with ``hold`` the handler
never returns, so the process is killed mid-job. Credentials come from the
environment (the local server's), as boto3 reads them.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import boto3

from pail import Pail

HOLD_MOST = 600.0
"""A held job waits at most this long: the test kills its process long before."""


def main(argv: list[str]) -> None:
    """Run ``work()`` on the queue named by ``argv`` until killed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background test run ignores it; we must not
    endpoint, bucket, timeout, marks = argv[:4]
    hold = argv[4:] == ["hold"]
    client = boto3.client("s3", endpoint_url=endpoint)
    pail = Pail(bucket, client, visibility_timeout=float(timeout))

    def build_report(payload: dict[str, Any]) -> dict[str, Any]:
        Path(marks, f"{os.getpid()}-{payload['n']}").touch()
        time.sleep(HOLD_MOST if hold else 0.05)  # the job's work
        return {"n": payload["n"], "by": os.getpid()}

    pail.work(build_report, poll_interval=0.5)


if __name__ == "__main__":
    main(sys.argv[1:])
