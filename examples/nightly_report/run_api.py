"""The nightly report through the Python API, on the local S3 server (or any bucket).

    python examples/nightly_report/run_api.py                 # starts a local server itself
    python examples/nightly_report/run_api.py --bucket B --endpoint-url http://127.0.0.1:9000

It makes the 02:00 schedule, runs the night's tick without waiting for 02:00
(the schedule is made as if a day ago, so the reaper's next pass finds the
latest 02:00 tick due), and works the queue until the merge is done: one plan
job, 40 exports, one merge that reads all 40 results. It prints the report.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nightly

from pail import Pail
from pail.clock import SystemClock


class MadeYesterday(SystemClock):
    """The producer's clock a day back: a schedule made with it has missed its last 02:00 tick."""

    def now(self) -> datetime:
        return datetime.now(UTC) - timedelta(days=1)


def night(pail: Pail, *, timeout: float = 120.0) -> dict[str, Any]:
    """Make the schedule, run the night's tick and every job it leads to; the merge's result."""
    nightly.schedule(Pail(pail.store, queue=pail.keys.namespace, clock=MadeYesterday()))
    ticks = pail.reap()  # the reaper's pass runs the due tick: one plan job
    plan_id = next(s.last_job for s in pail.schedules() if s.name == nightly.SCHEDULE)
    assert plan_id is not None, f"the tick enqueued nothing: {ticks}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        plan = pail.result(plan_id)
        merged = pail.result(plan["merge"]) if plan is not None else None
        if merged is not None:
            return {"plan": plan_id, **plan, "report": merged}
        ended = pail.status(plan["merge"] if plan is not None else plan_id)
        if ended is not None and ended.state.value in ("failed", "cancelled"):
            raise RuntimeError(f"the night's report ended {ended.state.value}: {ended.error}")
        if not pail.work_once(nightly.run):
            time.sleep(0.1)  # the merge is waiting: its last export is finishing elsewhere
    raise TimeoutError(f"the night's report was not done within {timeout} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bucket", default="reports")
    parser.add_argument("--endpoint-url", help="an S3 endpoint; without it, a local server starts")
    args = parser.parse_args(argv)
    if args.endpoint_url is not None:
        result = night(Pail.connect(args.bucket, endpoint_url=args.endpoint_url))
    else:
        from pail.local import ACCESS_KEY, REGION, SECRET_KEY, LocalS3, create_buckets

        with LocalS3() as server:
            create_buckets(server.endpoint_url, [args.bucket])
            local = Pail.connect(
                args.bucket,
                endpoint_url=server.endpoint_url,
                access_key_id=ACCESS_KEY,
                secret_access_key=SECRET_KEY,
                region=REGION,
            )
            result = night(local)
    print(result["report"]["text"], end="")
    print(f"plan {result['plan']}: {len(result['exports'])} exports, merge {result['merge']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
