"""What an open dashboard costs in S3 requests per minute, on an idle queue.

Starts the local S3 server, fills a queue (then leaves it idle: no worker),
serves the dashboard, and keeps one page open in headless Chromium (Debian's
``/usr/bin/chromium``) for ``--seconds``, so the page's own refresh loop runs
as it does for a person. Requests are counted twice: by botocore event hooks
on the dashboard's S3 client (what S3 would bill) and by the dashboard's own
meter (what its footer shows).

    scripts/dashboard-cost                 the overview and the queue page, 60 s each
    scripts/dashboard-cost --seconds 120 --interval 30
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from pail import Pail
from pail.dashboard import Dashboard, DashboardServer
from pail.local import LocalS3
from pail_bench.counting import RequestCounter, by_operation, diff, total

CHROMIUM = "/usr/bin/chromium"


def _fill(pail: Pail) -> None:
    ids = pail.enqueue_many([{"n": n} for n in range(20)])
    for _ in ids[:15]:
        pail.work_once(lambda payload: {"ok": True})


def measure(path: str, *, seconds: float, interval: float) -> dict[str, Any]:
    """Requests sent while ``path`` stays open ``seconds`` seconds."""
    from playwright.sync_api import sync_playwright

    with LocalS3() as server:
        pail = Pail.connect("idle", **server.connect_kwargs())  # type: ignore[arg-type]
        pail.store.client.create_bucket(Bucket="idle")  # type: ignore[attr-defined]
        _fill(pail)
        counter = RequestCounter()
        counter.attach(pail.store.client.meta.events)  # type: ignore[attr-defined]
        board = Dashboard(pail.store, interval=interval)
        with DashboardServer(board) as dashboard, sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page()
            page.goto(dashboard.link())
            if path != "/":
                page.goto(dashboard.origin + path)
            began, before = time.monotonic(), counter.snapshot()
            time.sleep(seconds)  # the benchmark's subject is wall time: requests per minute
            elapsed = time.monotonic() - began
            sent_by = diff(counter.snapshot(), before)
            sent = total(sent_by)
            refreshes = int(page.evaluate("Number(document.body.dataset.refreshed || 0)"))
            browser.close()
    return {
        "page": path,
        "interval_s": interval,
        "seconds": round(elapsed, 1),
        "refreshes": refreshes,
        "requests": sent,
        "requests_per_minute": round(sent * 60 / elapsed, 1),
        "by_operation": by_operation(sent_by),
        "meter_last_minute": board.requests_last_minute(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args()
    for path in ("/", "/q/_"):
        print(json.dumps(measure(path, seconds=args.seconds, interval=args.interval)), flush=True)


if __name__ == "__main__":
    main()
