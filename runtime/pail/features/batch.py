"""Enqueueing many jobs at once: concurrent PUTs, bounded parallelism, ids in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pail.errors import ConfigurationError, PailError

DEFAULT_MAX_WORKERS = 16


class BatchEnqueueError(PailError):
    """Some items of an ``enqueue_many`` failed; the others were enqueued.

    ``ids`` holds one entry per payload, in order: the job id, or None where
    that item failed. ``errors`` maps each failed index to its exception.
    Re-sending exactly the failed items (``failed_indices``) enqueues each
    payload once.
    """

    def __init__(self, ids: list[str | None], errors: dict[int, BaseException]) -> None:
        self.ids = ids
        self.errors = errors
        first = min(errors)
        super().__init__(
            f"{len(errors)} of {len(ids)} jobs were not enqueued "
            f"(first: item {first}: {errors[first]!r})"
        )

    @property
    def failed_indices(self) -> list[int]:
        return sorted(self.errors)


def enqueue_many(
    enqueue: Callable[[Any], str], payloads: Sequence[Any], *, max_workers: int
) -> list[str]:
    """Call ``enqueue`` on every payload, at most ``max_workers`` at a time; ids in order.

    Every item is attempted even if others fail; then, if any failed,
    ``BatchEnqueueError`` lists them (with the ids of those that succeeded).
    """
    if max_workers < 1:
        raise ConfigurationError(f"max_workers must be at least 1, got {max_workers}")
    items = list(payloads)
    if not items:
        return []
    ids: list[str | None] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        futures = [pool.submit(enqueue, payload) for payload in items]
        for index, future in enumerate(futures):
            try:
                ids[index] = future.result()
            except Exception as exc:  # noqa: BLE001 - reported per item in BatchEnqueueError
                errors[index] = exc
    if errors:
        raise BatchEnqueueError(ids, errors)
    return [job_id for job_id in ids if job_id is not None]
