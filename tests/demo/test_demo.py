"""``pail demo`` as a newcomer runs it, off a terminal (as in CI): what it prints, what it leaves.

The demo runs as a real process in its own session, with no AWS credentials
in its environment. The assertions are on its output: every job accounted
for, the poison job in the dead-letter queue with its error, the killed
worker's lease reclaimed by the reaper, and nothing left running afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support.command import LineReader, pail_script, process_env, start

pytestmark = pytest.mark.slow

ULID = r"[0-9A-HJKMNP-TV-Z]{26}"


def demo_env() -> dict[str, str]:
    """A fresh machine: no AWS account, no profile, no endpoint."""
    env = process_env({})
    for name in list(env):
        if name.startswith("AWS_"):
            del env[name]
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


def session_processes(session: int) -> list[str]:
    """The processes still alive in ``session`` (pid and command name)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited while we looked
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == session and fields[0] != "Z":
            alive.append(f"{stat.parent.name} {name}")
    return alive


def assert_nothing_left(session: int, port: int) -> None:
    deadline = time.monotonic() + 15
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], f"the demo left processes running: {left}"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def open_printed_status_page(lines: list[str]) -> None:
    """The held demo serves the browser status page; its link carries the job's presigned URLs."""
    link = next(
        line.split(": ", 1)[1] for line in lines if "the job whose worker was killed: " in line
    )
    page, _, fragment = link.partition("#")
    assert page.startswith("http://127.0.0.1:")
    assert "done=" in fragment and "X-Amz-Signature" in urllib.parse.unquote(fragment)
    with urllib.request.urlopen(page, timeout=10) as response:
        assert response.status == 200
        assert b"<html" in response.read().lower()


def test_given_a_fresh_machine_when_demo_runs_off_a_terminal_then_every_job_is_accounted_for() -> (
    None
):
    # --hold keeps the server up after the summary (until Enter), so the test
    # can open the printed URL and run the printed command, as a user would.
    started = time.monotonic()
    process = start(
        [pail_script(), "demo", "--hold"],
        demo_env(),
        start_new_session=True,
        stdin=subprocess.PIPE,
    )
    reader = LineReader(process.stdout)  # type: ignore[arg-type]
    try:
        reader.wait_for("Press Enter to stop it", timeout=180)
        elapsed = time.monotonic() - started
        try_printed_url_and_redrive(reader.lines)
        open_printed_status_page(reader.lines)
        assert process.stdin is not None
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    stdout = reader.rest()
    assert process.stderr is not None
    stderr = process.stderr.read()
    print(f"pail demo took {elapsed:.1f} s to its summary\n{stdout}")  # kept in the test log

    assert "Traceback" not in stderr
    lines = stdout.splitlines()

    # Every job accounted for.
    assert "jobs enqueued       200" in lines
    assert "done                199" in lines
    assert "dead-lettered       1" in lines
    assert any(
        line.startswith("all accounted for   yes: done + dead-lettered = enqueued")
        for line in lines
    )

    # The poison job is in the dead-letter queue, with its error.
    dead = re.search(rf"^Dead letter ({ULID}):$", stdout, re.MULTILINE)
    assert dead is not None
    assert "  attempts  4" in lines
    assert (
        "  error     RetiredSourceError: report fy2023_restated: source 'ledger_v1' was retired; "
        "no data can be read for this report"
    ) in lines
    assert f"dlq redrive pail-demo {dead.group(1)} --endpoint-url http://127.0.0.1:" in stdout

    # The killed worker's lease was reclaimed, and its job finished elsewhere.
    killed = re.search(
        rf"killed worker pid (\d+) with SIGKILL in the middle of job ({ULID})", stdout
    )
    assert killed is not None
    pid, job_id = killed.groups()
    assert re.search(
        rf"reaper: lease of job {job_id} expired [\d.]+ s after its worker \(pid {pid}\) died",
        stdout,
    )
    assert f"job {job_id} finished on attempt 2, on another worker: nothing lost" in stdout
    assert re.search(
        rf"^leases reclaimed    [1-9]\d* \(job {job_id}: worker pid {pid} was SIGKILLed",
        stdout,
        re.MULTILINE,
    )

    # Flaky jobs failed, were retried and succeeded.
    assert "transient failures  5 of 5 flaky reports failed on a warehouse timeout" in stdout

    # A presigned result URL for the job that survived its worker.
    url = re.search(
        rf"^  (http://127\.0\.0\.1:(\d+)/pail-demo/done/{job_id}\?\S+)$", stdout, re.MULTILINE
    )
    assert url is not None

    assert_nothing_left(process.pid, int(url.group(2)))


# A non-interactive shell starts a background job with SIGINT ignored, and exec
# keeps it ignored: Python then leaves SIGINT alone, and before the fix the demo
# ran to its end and exited 0 on Ctrl-C (seen when the suite ran in the background).
IGNORING_SIGINT = ["sh", "-c", 'trap "" INT; exec "$0" "$@"']


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-c-sigint-inherited-ignored", "sigterm"])
def test_given_demo_running_when_interrupted_then_it_stops_everything_it_started(how: str) -> None:
    wrapper = IGNORING_SIGINT if how == "ctrl-c-sigint-inherited-ignored" else []
    process = start(
        [*wrapper, pail_script(), "demo", "--jobs", "60", "--workers", "2"],
        demo_env(),
        start_new_session=True,
    )
    try:
        stdout = LineReader(process.stdout)  # type: ignore[arg-type]
        port = int(
            stdout.wait_for("server up at http://127.0.0.1:", timeout=60)
            .split(":")[2]
            .split(",")[0]
        )
        stdout.wait_for("enqueued 60 jobs", timeout=60)

        if how.startswith("ctrl-c"):
            os.killpg(process.pid, signal.SIGINT)  # what a terminal sends: the whole group
        else:
            process.send_signal(signal.SIGTERM)  # `kill PID`: the demo alone
        process.wait(timeout=60)
    finally:
        if process.poll() is None:  # failed half-way: nothing of the demo outlives the test
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    assert process.returncode == 130
    assert process.stderr is not None and "interrupted" in process.stderr.read()
    assert_nothing_left(process.pid, port)


def try_printed_url_and_redrive(printed: list[str]) -> None:
    """Open the presigned URL and run the redrive command exactly as the demo printed them."""
    lines = [line.rstrip("\n") for line in printed]
    heading = next(n for n, line in enumerate(lines) if line.startswith("Result of job"))
    url = next(line.strip() for line in lines if "/pail-demo/done/" in line)
    exports = next(line.strip() for line in lines if line.strip().startswith("export AWS_"))
    redrive = next(line.strip() for line in lines if " dlq redrive pail-demo " in line)

    with urllib.request.urlopen(url, timeout=10) as response:
        assert json.loads(response.read()) == json.loads(lines[heading + 1])

    # As printed, in "another terminal": no virtualenv on PATH, another folder.
    env = demo_env()
    venv_bin = str(Path(pail_script()).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env.pop("VIRTUAL_ENV", None)
    for assignment in shlex.split(exports)[1:]:
        name, _, value = assignment.partition("=")
        env[name] = value
    command = shlex.split(redrive)
    done = subprocess.run(command, env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == command[4]  # the redriven job's id
