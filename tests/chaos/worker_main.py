"""One chaos worker process: ``Pail.work`` through the fault proxy, recording every execution.

Run as ``python -m tests.chaos.worker_main --bucket B --endpoint URL --record FILE``.
Each execution appends ``start <n> <pid>`` before the handler's work and
``end <n> <pid>`` after it, with one ``os.write`` on an ``O_APPEND`` file
descriptor each, so lines from concurrent processes never interleave. pail's
own warnings about a job (a lost lease, a result not recorded) are appended
as ``log <job id> <pid> <message>``: they explain a duplicate execution.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import time
from typing import Any

from tests.support.queues import connect_to, local_kwargs


class _Record:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(self, text: str) -> None:
        os.write(self._fd, (text.replace("\n", " ") + "\n").encode())


class _PailLog(logging.Handler):
    """pail's warnings, into the record, keyed by the job id they name."""

    def __init__(self, record: _Record) -> None:
        super().__init__(logging.INFO)
        self._record = record

    def emit(self, entry: logging.LogRecord) -> None:
        args = entry.args if isinstance(entry.args, tuple) else ()
        job = next((a for a in args if isinstance(a, str) and len(a) == 26), "-")
        self._record.line(f"log {job} {os.getpid()} {entry.getMessage()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--visibility-timeout", type=float, default=1.5)
    parser.add_argument("--max-retries", type=int, default=10)
    parser.add_argument("--work-seconds", type=float, default=0.2)
    args = parser.parse_args(argv)
    record = _Record(args.record)
    logger = logging.getLogger("pail")
    logger.addHandler(_PailLog(record))
    logger.setLevel(logging.INFO)
    pid = os.getpid()
    rng = random.Random(pid)

    def handler(payload: Any) -> dict[str, Any]:
        n = payload["n"]
        record.line(f"start {n} {pid}")
        time.sleep(rng.uniform(0, args.work_seconds))  # the job's work, where a kill can land
        record.line(f"end {n} {pid}")
        return {"n": n, "by": pid}

    pail = connect_to(
        local_kwargs(args.endpoint),
        args.bucket,
        visibility_timeout=args.visibility_timeout,
        max_retries=args.max_retries,
    )
    pail.work(handler, poll_interval=0.5, min_poll_interval=0.05)


if __name__ == "__main__":
    main()
