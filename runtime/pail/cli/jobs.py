"""One job at a time: ``enqueue``, ``status``, ``result`` and ``url``."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from pail.bounds import MAX_DELAY
from pail.cli.context import checked_id, global_options, options, split_bucket
from pail.cli.exit_codes import CommandError, ExitCode
from pail.cli.params import Seconds
from pail.errors import ConfigurationError
from pail.output import Output, compact, state_text, when
from pail.protocol.dependencies.record import DEAD_LETTER, ON_FAILURE
from pail.queue import Pail
from pail.status import JobState, JobStatus
from pail.tags import parse as parse_tag
from pail.tags import validate as validate_tags


def read_payloads(source: str, *, lines: bool) -> list[Any]:
    """Parse a JSON payload from ``source``: literal JSON, ``@file`` or ``-`` for stdin.

    With ``lines``, every non-blank line is one payload (JSON Lines).

    >>> read_payloads('{"report_id": "q2"}', lines=False)
    [{'report_id': 'q2'}]
    """
    if source == "-":
        text, origin = sys.stdin.read(), "stdin"
    elif source.startswith("@"):
        path = Path(source[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read payload file {path}: {exc}", ExitCode.USAGE) from exc
        origin = str(path)
    else:
        text, origin = source, "argument"
    chunks = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        chunks = [(1, text)]
    payloads = []
    for number, chunk in chunks:
        try:
            payloads.append(json.loads(chunk))
        except (ValueError, RecursionError) as exc:  # not JSON, the digit limit, too deep
            where = f"{origin}, line {number}" if lines else origin
            raise CommandError(
                f"payload ({where}) is not valid JSON: {exc}", ExitCode.USAGE
            ) from exc
    if not payloads:
        raise CommandError(f"no payload in {origin}", ExitCode.USAGE)
    return payloads


@click.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] JSON|@FILE|-")
@click.option("--lines", is_flag=True, help="Each line of the input is one payload (JSON Lines).")
@click.option(
    "--key",
    default=None,
    metavar="KEY",
    help="Dedup key: enqueue at most one job per key (prints the existing id if used).",
)
@click.option(
    "--delay",
    type=Seconds(maximum=MAX_DELAY),
    default=None,
    metavar="SECONDS",
    help="Not claimable for this many seconds.",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="KEY=VALUE",
    help="Tag the job (repeat for more); find it with pail jobs --tag.",
)
@click.option(
    "--priority",
    type=click.Choice(["normal", "high"]),
    default="normal",
    show_default=True,
    help="A high-priority job is claimed before the normal backlog.",
)
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="ID",
    help="Wait (state waiting) until job ID succeeded (repeat: all of them); then pending once.",
)
@click.option(
    "--on-failure",
    type=click.Choice(list(ON_FAILURE)),
    default=DEAD_LETTER,
    show_default=True,
    help="With --after: what a dead-lettered dependency does to the waiting job.",
)
@global_options
@click.pass_context
def enqueue(
    ctx: click.Context,
    args: tuple[str, ...],
    lines: bool,
    key: str | None,
    delay: float | None,
    priority: str,
    tags: tuple[str, ...],
    after: tuple[str, ...],
    on_failure: str,
) -> None:
    """Add a job and print its id.

    The payload is literal JSON, @FILE to read it from a file, or - for stdin.

    \b
      pail enqueue jobs '{"report_id": "q2_revenue", "format": "pdf"}'
      pail enqueue jobs @job.json
      jq -c '.[]' batch.json | pail enqueue jobs - --lines

    With --after the job waits until every job it names has succeeded, then
    becomes pending once: at the next reaper pass (pail reap --every, or the
    workers' own), or at once if they have ended already (docs/dependencies.md):

    \b
      a=$(pail enqueue jobs '{"step": "export"}')
      pail enqueue jobs '{"step": "merge"}' --after "$a"

    With --key as well, the key names the waiting job: a repeat prints its id.
    """
    bucket, (source,) = split_bucket(args, ["PAYLOAD"])
    opts = options(ctx)
    payloads = read_payloads(source, lines=lines)
    labels = tag_options(tags)
    if after and (delay is not None or priority != "normal"):
        raise CommandError("--after goes with no --delay or --priority", ExitCode.USAGE)
    pail = opts.connect(bucket)
    out = opts.output()
    if key is not None:
        enqueue_keyed(
            pail,
            out,
            payloads,
            key,
            delay=delay,
            priority=priority,
            tags=labels,
            after=list(after) or None,
            on_failure=on_failure,
        )
        return
    for payload in payloads:
        job_id = pail.enqueue(
            payload,
            delay=delay,
            priority=priority,
            tags=labels,
            after=list(after) or None,
            on_failure=on_failure,
        )
        out.result({"id": job_id}, lambda job_id=job_id: out.line(job_id))


def enqueue_keyed(
    pail: Pail,
    out: Output,
    payloads: list[Any],
    key: str,
    *,
    delay: float | None = None,
    priority: str = "normal",
    tags: dict[str, str] | None = None,
    after: list[str] | None = None,
    on_failure: str = DEAD_LETTER,
) -> None:
    """``enqueue --key``: one payload, at most one job per key; say when the key was used."""
    if len(payloads) != 1:
        raise CommandError("--key takes exactly one payload", ExitCode.USAGE)
    done = pail.enqueue_once(
        payloads[0],
        key=key,
        delay=delay,
        priority=priority,
        tags=tags,
        after=after,
        on_failure=on_failure,
    )
    out.result({"id": done.id, "created": done.created}, lambda: out.line(done.id))
    if not done.created:
        out.note(f"key {key!r} already used: {done.id} is the existing job; nothing enqueued")


def tag_options(pairs: tuple[str, ...]) -> dict[str, str] | None:
    """``--tag KEY=VALUE`` options as tags, checked (a usage error names the bad one)."""
    if not pairs:
        return None
    tags: dict[str, str] = {}
    for pair in pairs:
        try:
            key, value = parse_tag(pair)
            tags[key] = value
            validate_tags(tags)
        except ConfigurationError as exc:
            raise CommandError(str(exc), ExitCode.USAGE) from None
    return tags


def read_status(pail: Pail, job_id: str) -> JobStatus:
    """The job's status, or a not-found error naming where pail looked."""
    status = pail.status(job_id)
    if status is None:
        raise CommandError(
            f"no job {job_id} in s3://{pail.bucket}/{pail.keys.root} "
            "(wrong bucket or --queue, or its objects expired?)",
            ExitCode.NOT_FOUND,
        )
    return status


def render_status(out: Output, status: JobStatus, traceback: bool) -> None:
    """A job's status as labelled rows.

    "attempts" is what the job records: the attempts started. The retry
    limit is the workers' setting, not the job's, so none is shown.
    """
    rows: list[tuple[str, Any]] = [
        ("job", status.id),
        ("state", state_text(status.state.value)),
        ("attempts", str(status.attempts)),
        ("enqueued", when(status.enqueued_at)),
    ]
    if status.state is JobState.RUNNING:
        rows.append(("holder", escape(status.holder or "-")))
        rows.append(("last renewal", when(status.updated_at)))
    else:
        rows.append(("updated", when(status.updated_at)))
    if status.tags:
        rows.append(("tags", escape(" ".join(f"{k}={v}" for k, v in status.tags.items()))))
    if status.progress is not None:
        rows.append(("progress", compact(status.progress, 200)))
    if status.error is not None:
        attempt = f" (attempt {status.error.attempt})" if status.error.attempt else ""
        rows.append(("error", f"[red]{escape(str(status.error))}[/]{attempt}"))
    out.key_values(rows)
    if traceback and status.error is not None and status.error.traceback:
        out.print()
        out.line(status.error.traceback.rstrip())


@click.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@click.option("--traceback", is_flag=True, help="Also print the last error's traceback.")
@global_options
@click.pass_context
def status(ctx: click.Context, args: tuple[str, ...], traceback: bool) -> None:
    """Show where a job is: pending, running, done, failed or cancelled, with its last error.

    A running job shows the worker that holds it and its lease's last
    renewal. "attempts" counts the attempts started; how many a job may
    have is the workers' --max-retries, which the job does not record.
    Exits 3 if no job has this id.
    """
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id, stored=True)  # a read: a quarantined "!x" stays readable
    opts = options(ctx)
    pail = opts.connect(bucket)
    found = read_status(pail, job_id)
    out = opts.output()
    out.result(found.to_json(), lambda: render_status(out, found, traceback))
    if found.state is JobState.FAILED and not opts.json:
        out.note(
            f"inspect: pail dlq show {bucket} {job_id}   retry: pail dlq redrive {bucket} {job_id}"
        )


class _Backoff:
    """Poll delays from 0.2 s, growing by half each time, up to ``ceiling``."""

    def __init__(self, ceiling: float) -> None:
        self._ceiling = ceiling
        self._next = min(0.2, ceiling)

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 1.5, self._ceiling)
        return delay


ENDED_WITHOUT_RESULT = frozenset({JobState.FAILED, JobState.CANCELLED})
"""States a job never leaves and that never have a result: waiting for one is pointless."""


def _not_done(status: JobStatus, bucket: str) -> CommandError:
    if status.state is JobState.FAILED:
        error = f": {status.error}" if status.error else ""
        return CommandError(
            f"job {status.id} failed after {status.attempts} attempt(s) and was dead-lettered"
            f"{error}; it will never have a result (pail dlq show {bucket} {status.id})",
            ExitCode.JOB_FAILED,
        )
    if status.state is JobState.CANCELLED:
        return CommandError(
            f"job {status.id} was cancelled; it will never have a result",
            ExitCode.JOB_CANCELLED,
        )
    return CommandError(
        f"job {status.id} is {status.state.value} (attempt {status.attempts}); no result yet",
        ExitCode.NOT_READY,
    )


def fetch_result(
    pail: Pail,
    job_id: str,
    *,
    wait: bool,
    timeout: float | None,
    poll_interval: float,
    on_wait: Any = None,
) -> Any:
    """The job's result; waits for it with ``wait``. Raises ``CommandError`` otherwise."""
    deadline = None if timeout is None else time.monotonic() + timeout
    backoff = _Backoff(poll_interval)
    announced = False
    while True:
        result = pail.result(job_id)
        if result is not None:
            return result
        found = read_status(pail, job_id)
        if found.state is JobState.DONE:
            continue  # finished between the two reads
        if found.state in ENDED_WITHOUT_RESULT or not wait:
            raise _not_done(found, pail.bucket)
        if not announced and on_wait is not None:
            on_wait(found)
            announced = True
        delay = backoff.next()
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommandError(
                    f"timed out after {timeout} s waiting for job {job_id} "
                    f"(still {found.state.value}, attempt {found.attempts})",
                    ExitCode.NOT_READY,
                )
            delay = min(delay, left)
        time.sleep(delay)


@click.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@click.option(
    "--wait", is_flag=True, help="Wait until the job is done (or dead-lettered, or cancelled)."
)
@click.option(
    "--timeout",
    type=Seconds(),
    metavar="SECONDS",
    help="With --wait: give up after this long (exit 4). Default: wait forever.",
)
@click.option(
    "--poll-interval",
    type=Seconds(minimum=0.01),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --wait: the longest pause between two reads.",
)
@global_options
@click.pass_context
def result(
    ctx: click.Context,
    args: tuple[str, ...],
    wait: bool,
    timeout: float | None,
    poll_interval: float,
) -> None:
    """Print a job's result (the handler's return value, as JSON).

    Exits 4 while the job is pending or running (or when --wait times out),
    5 if it was dead-lettered, 6 if it was cancelled (--wait stops waiting
    for either: such a job never has a result), 3 if there is no such job.
    """
    if timeout is not None and not wait:
        raise click.UsageError("--timeout needs --wait")
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id, stored=True)  # a read: a quarantined "!x" stays readable
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()

    def announce(found: JobStatus) -> None:
        out.note(f"waiting for job {job_id} ({found.state.value}, attempt {found.attempts})...")

    value = fetch_result(
        pail, job_id, wait=wait, timeout=timeout, poll_interval=poll_interval, on_wait=announce
    )
    out.result(value, lambda: out.pretty_json(value))


@click.command()
@click.argument("args", nargs=-1, metavar="[BUCKET] ID")
@click.option(
    "--expires",
    type=click.IntRange(min=1, max=604800),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="How long the URL stays valid (S3 allows up to 7 days).",
)
@click.option(
    "--status", "all_states", is_flag=True, help="Print the URL of every state the job can be in."
)
@click.option(
    "--page",
    is_flag=True,
    help="Serve the job's live status page on 127.0.0.1 and print its link (Ctrl-C stops it).",
)
@click.option("--open", "open_browser", is_flag=True, help="With --page: open it in a browser.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="With --page: the port on 127.0.0.1 [default: a free one].",
)
@global_options
@click.pass_context
def url(
    ctx: click.Context,
    args: tuple[str, ...],
    expires: int,
    all_states: bool,
    page: bool,
    open_browser: bool,
    port: int,
) -> None:
    """Print a presigned URL that GETs the job's result, for a browser or curl.

    The URL answers 404 until the job is done. With --status, print one URL
    per state (pending, running, done, failed): the job is in whichever
    answers 200, which is how a status page polls with no backend.
    Presigning is local: no request is made.

    With --page, serve the browser status page (docs/status-page.md) for the
    job on 127.0.0.1 until Ctrl-C (exit 130) and print its link; the page
    polls the bucket itself, so the bucket's CORS rule must allow the page's
    origin (the local server allows any). Exits 3 if no job has this id.
    """
    if page and all_states:
        raise click.UsageError("--page and --status do not go together")
    if (open_browser or port) and not page:
        raise click.UsageError("--open and --port need --page")
    bucket, (job_id,) = split_bucket(args, ["ID"])
    job_id = checked_id(job_id, stored=True)  # a read: a quarantined "!x" stays readable
    opts = options(ctx)
    pail = opts.connect(bucket)
    out = opts.output()
    if page:
        serve_page(pail, out, job_id, expires=expires, port=port, open_browser=open_browser)
        return
    if all_states:
        urls = pail.status_urls(job_id, expires_in=expires)

        def human() -> None:
            for state, link in urls.items():
                out.line(f"{state:<8} {link}")

        out.result({"id": job_id, "expires_in": expires, "urls": urls}, human)
        return
    link = pail.result_url(job_id, expires_in=expires)
    out.result({"id": job_id, "expires_in": expires, "url": link}, lambda: out.line(link))


def serve_page(
    pail: Pail, out: Output, job_id: str, *, expires: int, port: int, open_browser: bool
) -> None:
    """``url --page``: serve the job's status page until Ctrl-C (which ends the command, 130)."""
    from pail.status_page import serve_status_page

    read_status(pail, job_id)  # a clear not-found before anything is served
    try:
        link, stop = serve_status_page(pail, job_id, port=port, expires_in=expires)
    except OSError as exc:
        raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    try:
        out.result({"id": job_id, "expires_in": expires, "page": link}, lambda: out.line(link))
        out.note(f"status page of job {job_id}; its links expire in {expires} s (Ctrl-C stops it)")
        if open_browser:
            out.open_link(link)
        threading.Event().wait()
    finally:
        stop()
