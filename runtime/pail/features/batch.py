"""Enqueueing many jobs at once: concurrent PUTs, bounded parallelism, ids in order.

Every item's id is drawn before anything is sent, so that an item whose
outcome S3 left unknown (its write sent, every response lost) can be
reported with the id it may exist under, and sent again under that id
without ever making a second job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pail.config import validate_count
from pail.errors import ConfigurationError, EnqueueUnknownError, PailError

DEFAULT_MAX_WORKERS = 16
MAX_WORKERS = 256
"""Threads one batch may use: more only queues up on the HTTP connection pool."""


class BatchEnqueueError(PailError):
    """Some items of an ``enqueue_many`` were not (surely) enqueued; the others were.

    * ``ids``: one entry per payload, in order: the job id of each item that
      was enqueued, None for the others.
    * ``errors``: each item not known to be enqueued, by index, with its exception.
    * ``unknown``: among those, the items that **may** have been enqueued (S3
      failed after their write was sent), with the id each may exist under.
    * ``failed_indices``: the items surely not enqueued (``errors`` minus
      ``unknown``). Re-send them as new jobs.
    * ``unknown_indices``: re-send those under their ids, never as new jobs:
      ``pail.enqueue_many([payloads[i] for i in e.unknown_indices],
      ids=[e.unknown[i] for i in e.unknown_indices])``. An item already there
      counts as enqueued, so no payload is ever enqueued twice.
    """

    def __init__(
        self,
        ids: list[str | None],
        errors: dict[int, BaseException],
        unknown: dict[int, str] | None = None,
    ) -> None:
        self.ids = ids
        self.errors = errors
        self.unknown = dict(unknown or {})
        first = min(errors)
        maybe = f", {len(self.unknown)} of them may have been" if self.unknown else ""
        super().__init__(
            f"{len(errors)} of {len(ids)} jobs were not enqueued{maybe} "
            f"(first: item {first}: {errors[first]!r})"
        )

    @property
    def failed_indices(self) -> list[int]:
        """The items surely not enqueued: re-send them as new jobs."""
        return sorted(set(self.errors) - set(self.unknown))

    @property
    def unknown_indices(self) -> list[int]:
        """The items that may have been enqueued: re-send them under their ids (``unknown``)."""
        return sorted(self.unknown)


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
