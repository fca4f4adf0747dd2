"""0.1.1's promise with workers and nothing else: a SIGKILLed worker's job is retried, never lost.

Three ``work()`` processes (``worker_process.py``: a boto3 client and
``Pail(bucket, client)``, as a 0.1.1 user writes them) serve 30 jobs on the
real local server. No reaper runs. One of them is killed with SIGKILL while
it runs a job; the other two reclaim its expired lease from their claims
(``pail.protocol.reclaim``) and all 30 jobs end done, within three
visibility timeouts of the kill: the lease expires after one (plus a second
of clock resolution), a live worker's next pass comes at most one later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pail import Pail
from pail.local import LocalS3
from tests.servers import make_s3_client
from tests.support.command import ROOT, process_env
from tests.support.waiting import wait_until

VT = 8.0
"""Short, so the test is quick; long enough that a loaded machine renews every lease in time."""
JOBS = 30
START_TIMEOUT = 60.0
"""A bound on the processes starting and claiming (a cold interpreter, boto3's import)."""


def _marks(folder: Path, pid: int) -> list[str]:
    return [p.name.split("-", 1)[1] for p in folder.iterdir() if p.name.startswith(f"{pid}-")]


def test_given_three_work_processes_and_no_reaper_when_one_is_killed_mid_job_then_all_30_are_done_within_3_timeouts(
    s3_server: LocalS3, bucket: str, tmp_path: Path
) -> None:
    pail = Pail(bucket, make_s3_client(s3_server.connect_kwargs()), visibility_timeout=VT)
    ids = [pail.enqueue({"n": n}) for n in range(JOBS)]
    marks = tmp_path / "marks"
    marks.mkdir()
    env = process_env(s3_server.env())
    started: list[subprocess.Popen[bytes]] = []

    def spawn(*extra: str) -> subprocess.Popen[bytes]:
        args = [s3_server.endpoint_url, bucket, str(VT), str(marks), *extra]
        log = (tmp_path / f"worker-{len(started)}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.compat.worker_process", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()  # the child holds its own descriptor
        started.append(process)
        return process

    try:
        victim = spawn("hold")
        wait_until(lambda: bool(_marks(marks, victim.pid)), START_TIMEOUT, what="a held job")
        others = [spawn(), spawn()]
        wait_until(
            lambda: all(_marks(marks, p.pid) for p in others), START_TIMEOUT, what="the others"
        )
        (held,) = _marks(marks, victim.pid)

        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        victim.wait(timeout=START_TIMEOUT)
        wait_until(
            lambda: pail.stats().done == JOBS,
            timeout=3 * VT,
            what=f"all {JOBS} jobs done within 3 visibility timeouts of the kill",
        )
        recovered_after = time.monotonic() - killed_at

        assert pail.stats() == (0, 0, JOBS, 0, None)
        results = [pail.result(job_id) for job_id in ids]
        assert [r["n"] for r in results] == list(range(JOBS))
        assert results[int(held)]["by"] in {p.pid for p in others}  # retried by a live worker
        print(f"\nkilled worker's job done {recovered_after:.1f} s after the kill (VT {VT:g} s)")
        assert all(p.poll() is None for p in others)  # the live workers serve on
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait()
