"""Writing a job's outcome: ``done/{id}``, created once, by whoever gets there first.

``done/{id}`` is the single terminal key of a job, so a success, a death and
a cancellation race for one create-only PUT and only one can win. The one
exception is a dead marker of an earlier life (``pail.protocol.redrive``):
on the path of the redriven job's new life, such a marker (left by a redrive
that stopped half-way, or re-created by a late write) is not an outcome. The
writer removes it (``redrive.took_back``) and creates its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pail.codec import (
    META_ATTEMPT,
    META_LIFE,
    META_OUTCOME,
    META_TAGS,
    OUTCOME_SUCCEEDED,
    LeaseRecord,
)
from pail.keys import Keys
from pail.protocol import redrive
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import ObjectInfo, Store, WriteResult
from pail.tags import encode_metadata

TRIES = 3
"""Creates tried: each failed one removed a piece of a taken-back death, which cannot recur often."""


@dataclass(frozen=True, slots=True)
class Created:
    """``written`` if this call created the outcome; otherwise the ``existing`` one (if any)."""

    written: WriteResult | None
    existing: ObjectInfo | None = None
    mine: str = OUTCOME_SUCCEEDED
    """The outcome this call tried to write."""

    @property
    def outcome(self) -> str:
        """The job's outcome now: this call's, or the existing one's (no metadata: a success)."""
        if self.written is not None or self.existing is None:
            return self.mine
        return self.existing.metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)


def create(
    store: Store,
    keys: Keys,
    job_id: str,
    body: bytes,
    token: str,
    *,
    metadata: Mapping[str, str],
    life: int,
    stats: WriteStats | None,
    reason: str,
) -> Created:
    """Create ``done/{id}`` with ``body`` unless the job already has an outcome in ``life``.

    ``life`` is the job's current life (the ``redriven`` count of the entry or
    lease the writer acts on). A dead marker of an earlier life is not an
    outcome: it is cleared (``redrive.took_back``) and the create tried again.
    """
    key = keys.done(job_id)
    mine = metadata.get(META_OUTCOME, OUTCOME_SUCCEEDED)
    existing: ObjectInfo | None = None
    for _ in range(TRIES):
        written = put_conditional(
            store,
            key,
            body,
            token,
            if_none_match=True,
            metadata=dict(metadata),
            stats=stats,
            reason=reason,
        )
        if written is not None:
            return Created(written, mine=mine)
        existing = store.head(key)
        if existing is None:
            continue  # removed since our PUT (a redrive finishing): try again
        if redrive.took_back(store, keys, job_id, life, existing):
            continue
        return Created(None, existing, mine)
    return Created(None, existing, mine)


def metadata(outcome: str, record: LeaseRecord | None = None, life: int = 0) -> dict[str, str]:
    """The metadata of an outcome: what it is, and the attempt and life it ends."""
    meta = {META_OUTCOME: outcome, META_LIFE: str(record.redriven if record else life)}
    if record is not None:
        meta[META_ATTEMPT] = str(record.attempt)
        if record.tags:  # what status() shows of a finished job; untagged jobs carry nothing
            meta[META_TAGS] = encode_metadata(record.tags)
    return meta
