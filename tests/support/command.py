"""The ``pail`` command in tests: in-process (``Invoke``, the ``invoke`` fixture), or as a real
process (find the console script, read its output with a deadline)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO

from click.testing import Result

from pail.config import ALL_ENV_VARS

ROOT = Path(__file__).resolve().parents[2]

Invoke = Callable[..., Result]
"""``invoke(*args, input=None, env=None)``: run ``pail ARGS...`` in-process (the ``invoke`` fixture)."""


def restore_default_sigint() -> bool:
    """Give this process Python's default SIGINT handling if it inherited an ignored SIGINT.

    A non-interactive shell starts a background job (``nohup scripts/test &``,
    some CI runners) with SIGINT ignored, and an ignored signal stays ignored
    across ``exec``: every process a test started then ignored the Ctrl-C the
    test sent it (three CLI tests failed, and left their child running). A
    handled signal is reset to the default at ``exec``, so once this process
    handles SIGINT every child starts with the default, whichever way it is
    spawned (``start``, ``subprocess.run``, ``LocalS3``). Returns True if it
    changed anything. Called at the start of every test process (conftest).
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True


def pail_script() -> str:
    """The installed ``pail`` console script next to this interpreter."""
    script = Path(sys.executable).parent / "pail"
    assert script.exists(), f"the pail console script is not installed at {script}"
    return str(script)


def process_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without ``PAIL_*``, plus ``extra``; output unbuffered."""
    env = {k: v for k, v in os.environ.items() if k not in ALL_ENV_VARS}
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LineReader:
    """Reads a process's stream on a thread, so a test can wait for a line with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """Block until a line containing ``text`` arrives; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {text!r} within {timeout} s: {self.lines}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"stream ended without {text!r}: {self.lines}")
            self.lines.append(line)
            if text in line:
                return line

    def rest(self, timeout: float = 10.0) -> str:
        """Everything until the stream closes."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


def start(args: list[str], env: Mapping[str, str], **options: object) -> subprocess.Popen[str]:
    """Start ``args`` in the repository root with pipes for stdout and stderr."""
    stdin = options.pop("stdin", subprocess.DEVNULL)
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        args,
        cwd=ROOT,
        env=dict(env),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


Spawn = Callable[..., subprocess.Popen[str]]
"""``spawn(args, env, **options)``: ``start`` a process that the test's teardown ends (the ``spawn`` fixture)."""


def stop(process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """SIGTERM a process ``start`` started, wait for it, and close its pipes."""
    process.terminate()
    process.wait(timeout=timeout)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    process.stderr.close()


def kill_all(processes: Iterable[subprocess.Popen[str]]) -> None:
    """Kill each process still running, reap it and close its pipes: a fixture's teardown.

    Nothing a test started outlives it, whether the test passed or failed half-way
    (or already read the process's output to the end itself).
    """
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
