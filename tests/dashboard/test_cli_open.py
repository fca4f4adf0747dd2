"""``pail dashboard --open``: the browser's command line carries no secret, a link opens once.

The browser is a recorder script named by ``BROWSER`` (``webbrowser``
honours it): it writes the arguments it was started with to a file, which
is what every local user could read in ``/proc/PID/cmdline``.
"""

from __future__ import annotations

import http.client
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from pail.local import LocalS3
from tests.support.command import LineReader, pail_script, process_env, start, stop

pytestmark = pytest.mark.s3

DEADLINE = 60.0


def _open_link(link: str) -> tuple[int, str]:
    parts = urlsplit(link)
    assert parts.port is not None
    connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    try:
        connection.request("GET", f"{parts.path}?{parts.query}", headers={"Host": parts.netloc})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Set-Cookie") or ""
    finally:
        connection.close()


def _wait_for(path: Path) -> str:
    """The recorder's file, once the browser was started (bounded: the dashboard starts it at once)."""
    deadline = time.monotonic() + DEADLINE
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < deadline, "the browser was never started"
        time.sleep(0.05)
    return path.read_text()


def test_given_open_when_the_browser_starts_then_its_argv_holds_a_private_file_not_the_token(
    s3_server: LocalS3, bucket: str, tmp_path: Path
) -> None:
    record = tmp_path / "argv"
    recorder = tmp_path / "browser"
    recorder.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}.tmp && mv {record}.tmp {record}\n'
    )
    recorder.chmod(0o700)
    env = process_env({**s3_server.env(), "BROWSER": f"{recorder} %s"})
    process = start([pail_script(), "dashboard", bucket, "--open"], env, stdin=subprocess.PIPE)
    try:
        lines = LineReader(process.stdout)  # type: ignore[arg-type]
        printed = lines.wait_for("/?token=").strip()
        argv = _wait_for(record)

        assert "token" not in argv and str(urlsplit(printed).hostname) not in argv
        opened = Path(unquote(urlsplit(argv.strip()).path))
        assert argv.strip().startswith("file://") and opened.is_file()
        assert stat.S_IMODE(opened.stat().st_mode) == 0o600
        assert stat.S_IMODE(opened.parent.stat().st_mode) == 0o700
        link = opened.read_text().split("url=", 1)[1].split('"', 1)[0].replace("&amp;", "&")
        assert link != printed and urlsplit(link).netloc == urlsplit(printed).netloc

        first, second = _open_link(link), _open_link(link)
        assert first[0] == 200 and first[1].startswith("pail_dashboard=")
        assert second[0] == 403 and second[1] == ""  # one session, once

        assert process.stdin is not None
        process.stdin.write("\n")
        process.stdin.flush()
        fresh = lines.wait_for("/?token=").strip()
        assert fresh not in (printed, link) and _open_link(fresh)[0] == 200
    finally:
        stop(process)
    assert not opened.parent.exists()  # SIGTERM removed the redirect file
