"""One dead letter: inspect it, and delete it.

Deleting a dead letter removes its record, ``dlq/{id}``, under ``If-Match``
on the ETag the operator inspected, and keeps the job's dead marker,
``done/{id}`` (body ``null``, outcome ``dead``). The job stays ended: its
status is ``failed`` (without the details), ``result`` is None, and a stale
entry or a zombie owner still meets the marker (claim step 4, create-only
``done/``), so it never runs again. A lifecycle rule on ``done/`` removes
the marker with the results. ``docs/protocol.md`` ("Delete a dead letter").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pail.errors import ConditionFailedError, JobNotFoundError
from pail.keys import DLQ, Keys
from pail.operate.objects import JobDetail, decode_detail
from pail.status import find_object
from pail.store.base import Store


@dataclass(frozen=True, slots=True)
class Letter:
    """A dead letter as stored: its ETag (for a conditional delete) and what it says."""

    job_id: str
    key: str
    etag: str
    last_modified: datetime
    size: int
    detail: JobDetail
    body: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "etag": self.etag,
            "last_modified": self.last_modified.isoformat(),
            "size": self.size,
            **self.detail.to_json(),
            "payload": self.detail.payload,
            "raw": self.detail.raw,
        }


def read_letter(store: Store, keys: Keys, job_id: str) -> Letter | None:
    """The dead letter of ``job_id`` (one GET), readable or not; None if there is none."""
    obj = None
    for layout in keys.layouts(job_id):  # each shard it may live in, in a sharded queue
        obj = store.get(layout.dlq(job_id))
        if obj is not None:
            break
    if obj is None:
        return None
    detail = decode_detail(DLQ, obj.body, job_id)
    return Letter(job_id, obj.key, obj.etag, obj.last_modified, len(obj.body), detail, obj.body)


def delete_dead_letter(store: Store, keys: Keys, job_id: str, *, etag: str | None = None) -> bool:
    """Delete ``dlq/{id}`` if it is still the one read (``etag``, else the current one).

    True if deleted; False if it changed since (redriven and dead again, say):
    look again before deleting. Raises ``JobNotFoundError`` if there is none.
    Costs 1 DELETE with ``etag``, else a HEAD and a DELETE.
    """
    found = find_object(store, keys, job_id, DLQ) if keys.sharded else None
    key = found.key if found is not None else keys.dlq(job_id)
    if etag is None:
        current = store.head(key)
        if current is None:
            raise JobNotFoundError(f"no dead-lettered job {job_id!r}")
        etag = current.etag
    try:
        store.delete(key, if_match=etag)
    except ConditionFailedError as exc:
        if exc.missing or store.head(key) is None:
            raise JobNotFoundError(f"no dead-lettered job {job_id!r}") from exc
        return False
    return True
