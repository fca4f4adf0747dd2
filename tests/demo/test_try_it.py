"""What the demo tells a newcomer to run next: commands that work as printed, links that open.

The demo's "try it" commands are for another terminal, which has no
virtualenv activated and may start in another folder. ``--open-status`` on a
machine without a browser (a server, a container, SSH) must say so and give
the link, not stay silent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import webbrowser
from contextlib import ExitStack
from pathlib import Path

import pytest

from pail.demo.fleet import WorkerSpec
from pail.demo.run import status_pages
from pail.demo.summary import DemoReport, pail_command
from pail.local import LocalS3
from pail.output import Output


def fake_environment(root: Path) -> Path:
    """A virtualenv's ``bin`` folder with a ``python`` and a ``pail`` script in it."""
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "pail"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_given_an_activated_venv_when_the_demo_prints_pail_then_it_is_the_absolute_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_environment(tmp_path)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("VIRTUAL_ENV", str(bin_dir.parent))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.chdir(bin_dir.parent.parent)  # where `.venv/bin/pail demo` would be typed

    command = pail_command()

    assert command == str(bin_dir / "pail")
    other_terminal = subprocess.run(
        ["sh", "-c", f"command -v {command}"],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    assert other_terminal.returncode == 0, "the printed command does not resolve elsewhere"


def test_given_the_script_run_by_path_without_activation_then_the_absolute_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_environment(tmp_path)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    assert pail_command() == str(bin_dir / "pail")


def test_given_pail_on_path_outside_its_venv_when_printed_then_the_bare_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_environment(tmp_path)  # pipx's layout: a venv, and a link on PATH
    links = tmp_path / "local-bin"
    links.mkdir()
    (links / "pail").symlink_to(bin_dir / "pail")
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{links}{os.pathsep}/usr/bin")

    assert pail_command() == "pail"


def test_given_no_console_script_when_printed_then_python_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))

    assert pail_command() == f"{tmp_path / 'python3'} -m pail.cli"


def no_browser(url: str, *args: object, **kwargs: object) -> bool:
    return False  # what webbrowser.open returns where it finds no browser


def test_given_no_browser_when_a_link_is_opened_then_it_says_so_and_gives_the_link(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(webbrowser, "open", no_browser)

    opened = Output().open_link("http://127.0.0.1:1234/#id=J")

    assert opened is False
    err = capsys.readouterr().err
    assert "could not open a browser here" in err
    assert "http://127.0.0.1:1234/#id=J" in err


def test_given_a_browser_error_when_a_link_is_opened_then_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(url: str, *args: object, **kwargs: object) -> bool:
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "open", broken)

    assert Output().open_link("http://127.0.0.1:1/") is False
    assert "open this link yourself: http://127.0.0.1:1/" in capsys.readouterr().err


def test_given_open_status_without_a_browser_when_the_pages_are_served_then_the_link_is_given(
    s3_server: LocalS3,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(webbrowser, "open", no_browser)
    spec = WorkerSpec(bucket, s3_server.connect_kwargs(), 3.0, 3, "ledger", "logs")
    job_id = spec.connect().enqueue({"n": 1})
    report = DemoReport(s3_server.endpoint_url, bucket, 1, 1, 0, [], [], 1.0, 1.0, 0, 1, 3.0, 3)
    report.result_job = job_id

    with ExitStack() as stack:
        status_pages(Output(), report, spec, stack, open_browser=True)
        out, err = capsys.readouterr()

    link = next(line.split(": ", 1)[1] for line in out.splitlines() if "was killed: " in line)
    assert (
        f"could not open a browser here (no display, or no browser found); open this link yourself: {link}"
        in err
    )
