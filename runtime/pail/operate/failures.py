"""Recent failures: dead letters, and attempts that failed and wait for a retry.

Built from a snapshot (``pail.operate.snapshot``): the dead letters it
listed, newest first; the leases it listed whose owner recorded an error
(retrying, dying, or a retry's attempt running again); and pending entries
carrying their last attempt's error. Each costs one GET the first time it is
shown (``Reader`` caches by ETag), and only the first ``limit`` of each
source are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pail.codec import ErrorInfo
from pail.keys import DLQ, QUEUE, RUN
from pail.operate.jobs import JobRow, row_for
from pail.operate.objects import JobKind, Reader, job_id_of
from pail.operate.snapshot import Snapshot

DEFAULT_LIMIT = 10


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt (or unreadable object), newest first in ``recent_failures``."""

    row: JobRow
    error: ErrorInfo | None
    dead: bool

    @property
    def at(self) -> datetime:
        return self.row.last_modified

    def to_json(self) -> dict[str, Any]:
        return {
            **self.row.to_json(),
            "dead": self.dead,
            "error": self.error.to_json() if self.error else None,
        }


def recent_failures(
    snapshot: Snapshot, reader: Reader, *, limit: int = DEFAULT_LIMIT
) -> list[Failure]:
    """The newest failures the snapshot shows, at most ``limit``."""
    keys, now = snapshot.keys, snapshot.server_time
    found: list[Failure] = []
    for prefix, state, dead in (
        (DLQ, JobKind.DEAD.value, True),
        (RUN, JobKind.RUNNING.value, False),
        (QUEUE, JobKind.PENDING.value, False),
    ):
        scan = snapshot.scan_of(prefix)
        newest = sorted(scan.items, key=lambda item: item.last_modified, reverse=True)[:limit]
        for info in newest:
            if job_id_of(keys, info.key) is None:
                continue
            detail = reader.detail(keys, info, prefix)
            if detail is None:
                continue
            if not dead and detail.error is None and detail.unreadable is None:
                continue
            error = detail.error
            if detail.unreadable is not None:
                error = ErrorInfo("UnreadableObject", detail.unreadable)
            row = row_for(keys, info, state, now, detail)
            found.append(Failure(row, error, dead))
    found.sort(key=lambda failure: failure.at, reverse=True)
    return found[:limit]
