"""The end of the demo: what it did (``DemoReport``) and how it is told.

The summary table, a result URL, the dead letter, and what to try next.

Each part is one function called by ``render_summary``; a new part (a link
to the browser status page, say) is one more function and one more call.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from pail.codec import DeadLetter
from pail.local import credentials_export
from pail.output import Output, compact, to_json_text


@dataclass
class Reclaim:
    """The killed worker's story: its job, when it died, when the reaper took the lease."""

    job_id: str
    pid: int
    killed_at: float
    reclaimed_at: float | None = None
    finished_attempt: int | None = None


@dataclass
class DemoReport:
    """What the demo did, for the summary and for ``--json``."""

    endpoint_url: str
    bucket: str
    enqueued: int
    done: int
    failed: int
    missing: list[str]
    unknown: list[str]
    elapsed: float
    processing: float
    flaky: int
    workers: int
    visibility_timeout: float
    max_retries: int
    reclaims: list[Reclaim] = field(default_factory=list)
    other_reclaims: list[str] = field(default_factory=list)
    recovered: dict[str, int] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    result_job: str = ""
    result_url: str = ""
    result: Any = None

    @property
    def accounted(self) -> bool:
        """True when every enqueued job is done or dead-lettered, and nothing else is."""
        return not self.missing and not self.unknown and self.done + self.failed == self.enqueued

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint_url,
            "bucket": self.bucket,
            "enqueued": self.enqueued,
            "done": self.done,
            "failed": self.failed,
            "accounted": self.accounted,
            "missing": self.missing,
            "unknown": self.unknown,
            "elapsed_s": round(self.elapsed, 2),
            "processing_s": round(self.processing, 2),
            "jobs_per_s": round(self.enqueued / self.processing, 2) if self.processing else None,
            "workers": self.workers,
            "visibility_timeout": self.visibility_timeout,
            "max_retries": self.max_retries,
            "reclaimed": [
                {
                    "job_id": r.job_id,
                    "killed_pid": r.pid,
                    "reclaimed_after_s": (
                        round(r.reclaimed_at - r.killed_at, 2) if r.reclaimed_at else None
                    ),
                    "finished_attempt": r.finished_attempt,
                }
                for r in self.reclaims
            ],
            "other_reclaimed": self.other_reclaims,
            "recovered": self.recovered,
            "dead_letters": [
                {
                    "id": d.job_id,
                    "attempts": d.attempts,
                    "error": d.error.to_json() if d.error else None,
                    "payload": d.payload,
                }
                for d in self.dead_letters
            ],
            "result_job": self.result_job,
            "result_url": self.result_url,
            "result": self.result,
        }


def render_summary(out: Output, report: DemoReport, *, held: bool) -> None:
    """Print the demo's ending: JSON with ``--json``, else every part below.

    ``held`` says whether the server stays up after the summary (``--hold``).
    """
    if out.json_mode:
        out.line(to_json_text(report.to_json()))
        return
    summary_table(out, report)
    result_section(out, report)
    dead_letter_section(out, report)
    try_it_section(out, report, held=held)


def summary_table(out: Output, report: DemoReport) -> None:
    verdict = (
        "[bold green]yes[/]: done + dead-lettered = enqueued; none lost, none extra"
        if report.accounted
        else f"[bold red]NO[/]: missing {len(report.missing)}, unknown {len(report.unknown)}"
    )
    rate = report.enqueued / report.processing if report.processing else 0.0
    rows: list[tuple[str, Any]] = [
        ("jobs enqueued", str(report.enqueued)),
        ("done", f"[green]{report.done}[/]"),
        ("dead-lettered", f"[red]{report.failed}[/]"),
        ("all accounted for", verdict),
        ("leases reclaimed", _reclaimed(report)),
        ("transient failures", _recovered(report)),
        (
            "workers",
            f"{report.workers} processes, visibility timeout {report.visibility_timeout:g} s, "
            f"max retries {report.max_retries}",
        ),
        ("processing", f"{report.processing:.1f} s for {report.enqueued} jobs ({rate:.1f} jobs/s)"),
        ("wall time", f"{report.elapsed:.1f} s, server start to summary"),
    ]
    out.print()
    out.print("[bold]pail demo: summary[/]")
    out.key_values(rows)


def _reclaimed(report: DemoReport) -> str:
    parts = []
    for reclaim in report.reclaims:
        text = f"job {reclaim.job_id}: worker pid {reclaim.pid} was SIGKILLed mid-job"
        if reclaim.reclaimed_at is not None:
            waited = reclaim.reclaimed_at - reclaim.killed_at
            text += f"; the reaper requeued it {waited:.1f} s later"
        if reclaim.finished_attempt is not None:
            text += f"; done on attempt {reclaim.finished_attempt}"
        parts.append(text)
    parts.extend(
        f"job {job_id}: lease expired under load, requeued" for job_id in report.other_reclaims
    )
    count = len(report.reclaims) + len(report.other_reclaims)
    return escape(f"{count} ({'; '.join(parts)})" if parts else "0")


def _recovered(report: DemoReport) -> str:
    attempts = sorted(set(report.recovered.values()))
    shown = ", ".join(str(a) for a in attempts) or "-"
    return (
        f"{len(report.recovered)} of {report.flaky} flaky reports failed on a warehouse "
        f"timeout and succeeded on a retry (attempt {shown})"
    )


def result_section(out: Output, report: DemoReport) -> None:
    out.print()
    out.print(f"[bold]Result of job {report.result_job}[/] (the job whose worker was killed):")
    out.line(f"  {to_json_text(report.result)}")
    out.print("Presigned result URL (open it while the server runs; valid 1 hour):")
    out.line(f"  {report.result_url}")


def dead_letter_section(out: Output, report: DemoReport) -> None:
    for letter in report.dead_letters:
        out.print()
        out.print(f"[bold red]Dead letter[/] {letter.job_id}:")
        out.key_values(
            [
                ("  payload", escape(compact(letter.payload, 200))),
                ("  attempts", str(letter.attempts)),
                ("  error", f"[red]{escape(str(letter.error))}[/]" if letter.error else "-"),
            ]
        )


def try_it_section(out: Output, report: DemoReport, *, held: bool) -> None:
    pail = pail_command()
    endpoint = f"--endpoint-url {report.endpoint_url}"
    dead = report.dead_letters[0].job_id if report.dead_letters else "ID"
    lines = [
        credentials_export(),
        f"{pail} dlq show {report.bucket} {dead} {endpoint}",
        f"{pail} dlq redrive {report.bucket} {dead} {endpoint}",
        f"{pail} stats {report.bucket} {endpoint}",
        f"{pail} work {report.bucket} --handler pail.demo.jobs:handle {endpoint}",
    ]
    out.print()
    if held:
        out.print("[bold]Try it[/] in another terminal, while the server runs:")
    else:
        out.print(
            f"[bold]Try it[/]: the server stopped with the demo; run [bold]{pail} demo --hold[/] "
            "to keep it up, then in another terminal:"
        )
    for line in lines:
        out.line(f"  {line}")
    out.print(
        "[dim]  The redriven job fails again in `pail work`: its source is retired. "
        "Fix the cause first, as you would in production.[/]"
    )


def pail_command() -> str:
    """How to spell the ``pail`` command so that it works as printed, in a new terminal too.

    A new terminal has no virtualenv activated and may start in another
    folder, so a bare ``pail`` (or a path relative to here) only works from
    this shell. The bare name is printed only when the ``pail`` found on PATH
    outside this interpreter's own ``bin`` folder is this one (pipx, a user or
    system install); otherwise this environment's console script by its
    absolute path, else ``python -m pail.cli`` with this interpreter.
    """
    bin_dir = Path(sys.executable).parent
    script = bin_dir / "pail"
    if not script.exists():
        return f"{shlex.quote(sys.executable)} -m pail.cli"
    elsewhere = os.pathsep.join(
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not _same_folder(Path(entry), bin_dir)
    )
    found = shutil.which("pail", path=elsewhere)
    if found is not None and Path(found).resolve() == script.resolve():
        return "pail"
    return shlex.quote(str(script.absolute()))


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def hold_server(out: Output, report: DemoReport) -> None:
    """Keep the server up until the user presses Enter, so the URL and commands work."""
    out.print()
    out.print(
        f"The local S3 server at {report.endpoint_url} stays up so you can try the above. "
        "[bold]Press Enter to stop it.[/]"
    )
    with contextlib.suppress(EOFError, KeyboardInterrupt):
        input()
