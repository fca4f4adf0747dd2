"""The CLI tests pass wherever the suite is started, ``nohup scripts/test &`` included.

A non-interactive shell starts a background job with SIGINT ignored, and an
ignored signal stays ignored across ``exec``: before the fix, the three
Ctrl-C tests' children ignored the SIGINT the test sent, the tests failed,
and each left its child running. The test process now handles SIGINT itself
(``restore_default_sigint``, from the root conftest), so its children start
with the default.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.command import ROOT, process_env

# What `cmd &` does in a script (and `nohup`, which keeps it): SIGINT ignored, through exec.
IGNORING_SIGINT = ["sh", "-c", 'trap "" INT; exec "$0" "$@"']

CHILD_SIGINT = textwrap.dedent(
    """
    import signal, subprocess, sys
    from tests.support.command import restore_default_sigint

    print("inherited ignored:", signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
    restore_default_sigint()
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    print("child default:", child.stdout.strip())
    """
)


def test_given_sigint_ignored_when_restored_then_children_start_with_the_default() -> None:
    done = subprocess.run(
        [*IGNORING_SIGINT, sys.executable, "-c", CHILD_SIGINT],
        cwd=ROOT,
        env=process_env({}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["inherited ignored: True", "child default: True"]


@pytest.mark.slow
def test_given_the_suite_started_in_the_background_when_a_ctrl_c_test_runs_then_it_passes(
    tmp_path: Path,
) -> None:
    test = "tests/cli/test_rough_edges.py::test_given_a_watch_when_ctrl_c_then_exit_130"
    done = subprocess.run(
        [
            *IGNORING_SIGINT,
            sys.executable,
            "-m",
            "pytest",
            test,
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--basetemp={tmp_path / 'inner'}",
            "--timeout",
            "300",
        ],
        cwd=ROOT,
        env=process_env({}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout
