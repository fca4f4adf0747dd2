"""One chaos worker process: ``Pail.work`` through the fault proxy, recording every execution.

Run as ``python -m tests.chaos.worker_main --bucket B --endpoint URL --record FILE``.
Each execution appends a JSON line as the handler starts and another as it
returns, each with the lease it ran under (``tests.chaos.audit``), with one
``os.write`` on an ``O_APPEND`` file descriptor each, so lines from
concurrent processes never interleave.

``--flow`` serves a fan-in (``fan_in.py``): the children are ordinary chaos
jobs; the continuation (payload ``{"merge": true, "n": N}``) also records a
``merge`` line with the calls of the results it read
(``current_job().dependencies``), and returns them with their lease tokens.
Its first run (the fleet's, by a file only one process can create) works
until the runner SIGKILLs it.

``--known-bad`` runs a worker that breaks the protocol, to show the audit
catches it (``test_chaos.py``):

* ``unleased``: runs the handler on every pending entry it lists, without
  claiming it (no lease at all);
* ``long-lease``: ``Pail.work``, but believing the visibility timeout is 30 s
  while the reaper and the other workers use the run's: it renews every 10 s,
  so its leases expire under it and it runs on, sure it still holds them.
  Its jobs take ``LONG_WORK`` seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pail import Pail, current_job
from pail.codec import Envelope
from pail.errors import PailError
from pail.keys import QUEUE
from tests.chaos.audit import end_line, lease_fields, start_line
from tests.support.queues import connect_to, local_kwargs

KNOWN_BAD = ("unleased", "long-lease")
FIRST_MERGE_WORK = 60.0
"""Seconds the first run of a fan-in's merge works: the runner SIGKILLs it as soon as it reads
its ``merge`` line, so the run is cut short whatever the machine's load; the bound only ends
a run whose runner failed to."""
BAD_VISIBILITY_TIMEOUT = 30.0
LONG_WORK = 20.0
"""Far longer than the run's lease lives unrenewed (visibility timeout + 1 s) plus a reaper pass
and another worker's claim. It costs no time: the run ends once another worker finished the job,
and the fleet's stop ends this one."""


class _Record:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(self, text: str) -> None:
        os.write(self._fd, (text.replace("\n", " ") + "\n").encode())


class _Handler:
    """The job: record the start with its lease, work, record the end."""

    def __init__(self, record: _Record, work: Callable[[], float]) -> None:
        self._record = record
        self._work = work
        self._pid = os.getpid()

    def __call__(self, payload: Any, job_id: str | None = None) -> dict[str, Any]:
        n = payload["n"]
        job = current_job()
        now = time.monotonic()
        lease = lease_fields(job.message, now) if job is not None else None
        self._record.line(start_line(n, self._pid, now, lease, job_id))
        time.sleep(self._work())  # the job's work, where a kill can land
        now = time.monotonic()
        ended = lease_fields(job.message, now) if job is not None else None
        self._record.line(end_line(n, self._pid, now, ended))
        return {"n": n, "by": self._pid, "lease": lease["lease"] if lease else None}


class _FlowHandler(_Handler):
    """A fan-in's jobs: the children as ``_Handler``'s; the merge reads its dependencies' results."""

    def __init__(self, record: _Record, work: Callable[[], float], first: Path) -> None:
        super().__init__(record, work)
        self._first = first

    def _first_merge(self) -> bool:
        """True for the fleet's first run of the merge (a file only one process can create)."""
        try:
            os.close(os.open(self._first, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return False
        return True

    def __call__(self, payload: Any, job_id: str | None = None) -> dict[str, Any]:
        if not payload.get("merge"):
            return super().__call__(payload, job_id)
        n = payload["n"]
        job = current_job()
        assert job is not None, "the merge runs as a job"
        now = time.monotonic()
        lease = lease_fields(job.message, now)
        self._record.line(start_line(n, self._pid, now, lease, job_id))
        results = job.dependencies
        calls = sorted(int(r["n"]) for r in results.values())
        self._record.line(json.dumps({"k": "merge", "n": n, "pid": self._pid, "deps": calls}))
        time.sleep(FIRST_MERGE_WORK if self._first_merge() else self._work())
        ended = time.monotonic()
        self._record.line(end_line(n, self._pid, ended, lease_fields(job.message, ended)))
        return {
            "n": n,
            "by": self._pid,
            "lease": lease["lease"],
            "results": {str(r["n"]): r["lease"] for r in results.values()},
        }


def _run_unleased(pail: Pail, handler: _Handler) -> None:
    """Known-bad: run every pending job it sees, never claiming one."""
    done: set[str] = set()
    while True:
        try:
            for item in pail.store.list(pail.keys.prefix(QUEUE)).items:
                job_id = pail.keys.entry_id(item.key, QUEUE)
                found = pail.store.get(item.key) if job_id and job_id not in done else None
                if job_id and found is not None:
                    done.add(job_id)
                    handler(Envelope.decode(found.body).payload, job_id)
        except PailError:
            pass
        time.sleep(0.05)  # its polling interval


def main(argv: list[str] | None = None) -> None:
    """Work the queue (or break the protocol, with ``--known-bad``) until killed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--visibility-timeout", type=float, default=1.5)
    parser.add_argument("--max-retries", type=int, default=10)
    parser.add_argument("--work-seconds", type=float, default=0.2)
    parser.add_argument("--known-bad", choices=KNOWN_BAD)
    parser.add_argument("--ready", help="a file to create once connected, just before working")
    parser.add_argument("--flow", action="store_true", help="serve a fan-in (fan_in.py)")
    args = parser.parse_args(argv)
    record = _Record(args.record)
    rng = random.Random(os.getpid())
    long_lease = args.known_bad == "long-lease"
    pail = connect_to(
        local_kwargs(args.endpoint),
        args.bucket,
        visibility_timeout=BAD_VISIBILITY_TIMEOUT if long_lease else args.visibility_timeout,
        max_retries=args.max_retries,
    )
    work = (lambda: LONG_WORK) if long_lease else (lambda: rng.uniform(0, args.work_seconds))
    handler = (
        _FlowHandler(record, work, Path(args.record).parent / "merge.first")
        if args.flow
        else _Handler(record, work)
    )
    if args.ready:
        os.close(os.open(args.ready, os.O_WRONLY | os.O_CREAT, 0o644))
    if args.known_bad == "unleased":
        _run_unleased(pail, handler)
    pail.work(handler, poll_interval=0.5, min_poll_interval=0.05)


def zygote() -> None:
    """``--zygote``: for each line of stdin (a worker's arguments and log file, as JSON), fork
    a worker running ``main`` with them, and print its pid.

    The chaos fleet starts and restarts its workers this way. Each child is a new process
    with its own pid, client, threads and leases; what it shares with the one it replaces
    is only the modules this process imported before the fork, so a restart costs a fork,
    not the ~0.5 s of CPU that importing pail and boto3 takes (39 starts in a CI run).
    """
    # Reaped as they end (their CPU time then counts in this process's children's, as a
    # Popen'd worker's did); the fleet watches each through a pidfd, not through its pid.
    signal.signal(signal.SIGCHLD, _reap)
    for line in sys.stdin:
        argv, log = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _forked_worker(argv, log)
        print(pid, flush=True)


def _reap(_signum: int, _frame: object) -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _forked_worker(argv: list[str], log: str) -> NoReturn:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    code = 1
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()  # into the log: os._exit below ends the child before Python would
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        zygote()
    else:
        main()
