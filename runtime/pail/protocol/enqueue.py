"""Enqueueing: a job's first pending entry, one at a time or many at once.

``put_pending`` is the producer's one write (``docs/protocol.md``, "Enqueue"):
PUT ``queue/{id}`` (or a delayed entry) create-only, under a fresh id. A
failed condition can only be this same write, sent earlier and answered
late: nobody else can hold a fresh ULID. No read-back is made (a producer
granted ``PutObject`` on ``queue/`` only could not read anyway). A resend can
re-create an entry a worker already took and finished; the claim's HEAD of
``done/{id}`` (its step 4) drops it.

``enqueue_many`` sends many such writes concurrently, ids in order. Every
item's id is drawn before anything is sent, so that an item whose outcome S3
left unknown (its write sent, every response lost) can be reported with the
id it may exist under, and sent again under that id without ever making a
second job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from pail.bounds import validate_count
from pail.codec import Envelope
from pail.errors import (
    AccessDeniedError,
    BatchEnqueueError,
    BucketNotFoundError,
    ConfigurationError,
    EnqueueUnknownError,
    PailError,
    StorageError,
)
from pail.jsonsafe import check_value
from pail.keys import Keys
from pail.protocol import delay, index
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store
from pail.tags import Tags

log = logging.getLogger("pail")

_REFUSED = (BucketNotFoundError, AccessDeniedError, ConfigurationError)
"""Errors that mean the server refused a write: it was not applied."""

DEFAULT_MAX_WORKERS = 16
MAX_WORKERS = 256
"""Threads one batch may use: more only queues up on the HTTP connection pool."""


def put_pending(
    store: Store,
    keys: Keys,
    payload: Any,
    job_id: str,
    *,
    now: datetime,
    due: datetime | None = None,
    stats: WriteStats | None = None,
    tags: Tags | None = None,
    trace: dict[str, str] | None = None,
    then: Sequence[str] = (),
) -> str:
    """Create the job's pending entry (create-only); its id, or an error.

    ``now`` is the producer's wall clock (``enqueued_at``); with ``due`` the
    entry is a delayed one. Raises ``EnqueueUnknownError`` (with the id) when
    S3 failed after the write was sent and sending it once more did not
    settle whether it landed, and ``PayloadError`` (saying where) for a
    payload JSON cannot hold. ``tags`` (checked by ``pail.tags.validate``) go
    into the envelope and, before it is written, into the search index
    (``pail.protocol.index``): an untagged job makes this one PUT only.
    ``then`` names the jobs waiting for this one (``pail.protocol.dependencies``).
    """
    check_value(payload, "payload")
    envelope = Envelope(
        payload=payload,
        enqueued_at=now.isoformat(),
        tags=tags or {},
        trace=trace or {},
        then=tuple(then),
    )
    body = envelope.encode()
    key = keys.queue(job_id) if due is None else delay.delayed_key(keys, due, job_id)
    if envelope.tags:
        index.write(store, keys, job_id, envelope.tags)
    try:
        written = put_conditional(
            store,
            key,
            body,
            envelope.write,
            if_none_match=True,
            stats=stats,
            reason="enqueue",
            read_back=False,
        )
    except _REFUSED:
        raise  # the server refused the write: nothing was enqueued
    except StorageError as exc:
        return _settle_unknown(store, key, body, envelope.write, job_id, exc)
    if written is None:
        log.info("job %s: enqueued by an earlier try whose response was lost", job_id)
    return job_id


def _settle_unknown(
    store: Store, key: str, body: bytes, token: str, job_id: str, cause: StorageError
) -> str:
    """The write may have landed with every response lost: send the very same one again.

    Created, or refused because it is there (the first write's own: the id
    is fresh), the job is enqueued. This is the resend botocore makes, so
    the protocol already covers an entry re-created after its job ran
    (the claim's HEAD of ``done/{id}`` drops it).
    """
    log.warning("job %s: enqueue failed after it was sent (%s); sending it again", job_id, cause)
    try:
        put_conditional(store, key, body, token, if_none_match=True, read_back=False)
    except PailError as again:
        raise EnqueueUnknownError(job_id, again) from cause
    return job_id


def enqueue_many(
    put: Callable[[Any, str], str],
    payloads: Sequence[Any],
    ids: Sequence[str],
    *,
    max_workers: int,
) -> list[str]:
    """Call ``put(payload, job_id)`` on every item, at most ``max_workers`` at a time; ids in order.

    Every item is attempted even if others fail; then, if any failed,
    ``BatchEnqueueError`` lists them (with the ids of those that succeeded,
    and the ids of those whose outcome is unknown).
    """
    validate_count("max_workers", max_workers, minimum=1, maximum=MAX_WORKERS)
    items = list(payloads)
    if len(ids) != len(items):
        raise ConfigurationError(f"{len(ids)} ids for {len(items)} payloads")
    if not items:
        return []
    done: list[str | None] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    unknown: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        futures = [
            pool.submit(put, payload, job_id) for payload, job_id in zip(items, ids, strict=True)
        ]
        for index, future in enumerate(futures):
            try:
                done[index] = future.result()
            except EnqueueUnknownError as exc:
                errors[index], unknown[index] = exc, exc.job_id
            except Exception as exc:  # noqa: BLE001 - reported per item in BatchEnqueueError
                errors[index] = exc
    if errors:
        raise BatchEnqueueError(done, errors, unknown)
    return [job_id for job_id in done if job_id is not None]
