"""``pail pause`` and ``pail resume``: stop and restart claiming on a queue (``pail.protocol.pause``)."""

from __future__ import annotations

from typing import Any

import click

from pail.cli.context import bucket_argument, global_options, options, resolve_bucket
from pail.operate.text import one_line
from pail.protocol.pause import PauseState
from pail.queue import Pail


def pause_text(state: PauseState | None) -> str:
    """One line about a queue's pause, for ``stats``, ``pause`` and ``queues``.

    >>> from datetime import UTC, datetime
    >>> pause_text(None)
    'not paused'
    >>> pause_text(PauseState("_pail/paused", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "ops", "deploy"))
    'paused since 2026-01-02 03:04:05 UTC by ops: deploy'
    """
    if state is None:
        return "not paused"
    text = f"paused since {state.paused_at.strftime('%Y-%m-%d %H:%M:%S UTC')}"
    if state.by:
        text += f" by {one_line(state.by, 60)}"
    if state.reason:
        text += f": {one_line(state.reason, 120)}"
    return text


def pause_json(state: PauseState | None) -> dict[str, Any]:
    """A queue's pause as JSON: ``{"paused": false}`` or the marker's details."""
    return {"paused": False} if state is None else state.to_json()


def _where(pail: Pail) -> str:
    return f"s3://{pail.bucket}/{pail.keys.root}"


@click.command()
@bucket_argument
@click.option("--reason", metavar="TEXT", help="Why, for whoever looks at the queue next.")
@global_options
@click.pass_context
def pause(ctx: click.Context, bucket: str | None, reason: str | None) -> None:
    """Pause the queue: workers claim no job until `pail resume`.

    Running jobs finish. Each worker stops claiming at its next page refill
    (at most a page of claims later, and never later than one visibility
    timeout); `work-once` and the worker Lambda then exit without claiming,
    `pail work` idles. Jobs can still be enqueued. Cost: 1 PUT (the marker
    `_pail/paused`), and 1 HEAD per worker page refill while jobs wait.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    created = pail.pause(reason)
    state = pail.paused()

    def human() -> None:
        if created:
            out.line(f"paused {_where(pail)}: workers claim nothing from their next page refill")
        else:
            out.line(f"{_where(pail)} was already {pause_text(state)}")

    out.result({**pause_json(state), "changed": created}, human)


@click.command()
@bucket_argument
@global_options
@click.pass_context
def resume(ctx: click.Context, bucket: str | None) -> None:
    """Resume a paused queue: workers claim again at their next page refill (or poll).

    Cost: 1 HEAD and 1 DELETE.
    """
    opts = options(ctx)
    pail = opts.connect(resolve_bucket(bucket))
    out = opts.output()
    removed = pail.resume()

    def human() -> None:
        out.line(f"resumed {_where(pail)}" if removed else f"{_where(pail)} was not paused")

    out.result({"paused": False, "changed": removed}, human)
