"""One reaper pass in a process of its own, with the page size lowered: ``python -m tests.aws.reap_once``.

A fresh process knows nothing of earlier passes but what the bucket holds,
which is what a cron ``reap()``, ``pail reap`` or a cold reaper Lambda sees.
Prints the pass's ``ReapReport`` as JSON. With ``--wait``, it first prints
``ready`` once it is connected and reaps only after a line on stdin: a test
can then start the pass at a moment of its choosing (after a progress event),
not after an interpreter's start-up of unknown length.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from pail.protocol.reaper import Reaper
from pail.protocol.settle import Policy
from tests.support.queues import connect_to, local_kwargs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bucket")
    parser.add_argument("endpoint_url")
    parser.add_argument("--visibility-timeout", type=float, required=True)
    parser.add_argument("--page-size", type=int, required=True)
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("--wait", action="store_true", help="print ready, reap after a stdin line")
    args = parser.parse_args()
    queue = connect_to(local_kwargs(args.endpoint_url), args.bucket)
    policy = Policy(max_retries=3, visibility_timeout=args.visibility_timeout)
    reaper = Reaper(
        queue.store, queue.keys, policy, page_size=args.page_size, max_pages=args.max_pages
    )
    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
    print(json.dumps(dataclasses.asdict(reaper.reap())))


if __name__ == "__main__":
    main()
