"""The demo's worker processes: start them, kill one, and always stop them all.

Each worker is a separate process (``spawn``: no locks or threads inherited
from the demo) that runs ``pail.runner.run``, the same loop as ``pail work``
and the Fargate task, with the demo's handler. Their output goes to a log
file, not to the demo's display.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pail.local import exit_with_parent

if TYPE_CHECKING:
    from pail.queue import Pail


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything a demo worker process needs (it is pickled to the child)."""

    bucket: str
    endpoint: dict[str, str]
    """``LocalS3.connect_kwargs()``: where the server is, and its credentials."""
    visibility_timeout: float
    max_retries: int | None
    ledger: str
    log_dir: str
    # A worker that outlives its demo (the demo itself was SIGKILLed) still exits.
    time_budget: float = 300.0
    poll_interval: float = 0.5

    def connect(self) -> Pail:
        """The demo's queue on the demo's server, as the demo and every worker see it."""
        from pail.queue import Pail  # in a worker, after its logging is set up

        return Pail.connect(
            self.bucket,
            endpoint_url=self.endpoint["endpoint_url"],
            access_key_id=self.endpoint["access_key_id"],
            secret_access_key=self.endpoint["secret_access_key"],
            region=self.endpoint["region"],
            visibility_timeout=self.visibility_timeout,
            max_retries=self.max_retries,
            # The demo runs the reaper on a schedule, as a deployment does, and
            # tells its reclaim of the killed worker's lease: workers leave
            # expired leases to it (a worker's own pass would race it for them).
            reclaim=False,
        )


def worker_main(spec: WorkerSpec, number: int) -> None:
    """The body of demo worker ``number``: run jobs until SIGTERM or the time budget."""
    log_path = Path(spec.log_dir) / f"worker-{number}.log"
    log_file = log_path.open("a", buffering=1)
    os.dup2(log_file.fileno(), 1)
    os.dup2(log_file.fileno(), 2)
    logging.basicConfig(
        stream=log_file,
        level=logging.INFO,
        format=f"%(asctime)s worker-{number} pid={os.getpid()} %(levelname)s %(message)s",
    )
    # End this worker if the demo dies without stopping it (SIGKILL, OOM).
    exit_with_parent(os.getppid())
    from pail import runner
    from pail.demo.jobs import handle

    summary = runner.run(
        spec.connect(),
        functools.partial(handle, ledger=Path(spec.ledger)),
        once=False,
        time_budget=spec.time_budget,
        poll_interval=spec.poll_interval,
        install_signal_handlers=True,
    )
    logging.getLogger("pail.demo").info("worker %d stopped: %s", number, summary)


@contextmanager
def _sigint_ignored_by_children() -> Iterator[None]:
    """Start children with SIGINT ignored, as exec keeps an ignored signal ignored.

    A Ctrl-C reaches every process of the terminal's group. A worker still
    importing would die with a traceback over the demo's display; ignoring
    SIGINT until ``runner.run`` installs its own handler (which stops the
    worker cleanly) leaves the demo to stop its workers itself.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Fleet:
    """``size`` demo worker processes; use it as a context manager so none outlives the demo."""

    spec: WorkerSpec
    size: int
    processes: list[BaseProcess] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)

    def start(self) -> Fleet:
        context = multiprocessing.get_context("spawn")
        try:
            with _sigint_ignored_by_children():
                for number in range(1, self.size + 1):
                    process = context.Process(
                        target=worker_main,
                        args=(self.spec, number),
                        name=f"pail-demo-worker-{number}",
                    )
                    process.start()
                    self.processes.append(process)
        except BaseException:
            self.stop(grace=2.0)
            raise
        return self

    @property
    def pids(self) -> set[int]:
        return {p.pid for p in self.processes if p.pid is not None}

    def alive(self) -> int:
        return sum(1 for p in self.processes if p.is_alive())

    def kill(self, pid: int) -> None:
        """SIGKILL worker ``pid``: no cleanup, no lease released, like a crashed host."""
        for process in self.processes:
            if process.pid == pid:
                os.kill(pid, signal.SIGKILL)
                process.join(5)
                self.killed.append(pid)
                return
        raise ValueError(f"pid {pid} is not a demo worker")

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every worker (the runner finishes its job and exits), then SIGKILL stragglers."""
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of every worker's log, for a failure report."""
        chunks = []
        for path in sorted(Path(self.spec.log_dir).glob("worker-*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            chunks.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(chunks)

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(grace=10.0 if exc is None else 2.0)
