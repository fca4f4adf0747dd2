"""``enqueue_many`` when S3 applies a PUT but every response to it is lost.

A proxy in front of the local S3 server lets one item's first PUT through and
drops the connection before its response, then drops every resend before it
reaches the server. The job exists; the producer never heard so. Following
the documented recovery must never enqueue that payload twice.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from pail import BatchEnqueueError, EnqueueUnknownError, Pail
from tests.support.scripted_proxy import Action, Request, ScriptedProxy, connect_through

VICTIM = 3  # the payload whose write lands unheard


class LostResponses:
    """The victim's first PUT is applied and its response lost; later tries are dropped until healed."""

    def __init__(self, heal_after: int | None) -> None:
        self.heal_after = heal_after
        self.key: str | None = None
        self.tries = 0
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Action:
        if not request.is_("PUT", "queue/"):
            return Action.FORWARD
        with self._lock:
            if self.key is None and b'"n":%d' % VICTIM in request.body:
                self.key = request.key
            if request.key != self.key:
                return Action.FORWARD
            self.tries += 1
            if self.tries == 1:
                return Action.DROP_AFTER
            if self.heal_after is not None and self.tries > self.heal_after:
                return Action.FORWARD
            return Action.DROP_BEFORE


@pytest.fixture
def through(bucket: str, proxy: ScriptedProxy) -> Pail:
    return connect_through(proxy, bucket)


def pending_payloads(queue: Pail) -> Counter[int]:
    found: Counter[int] = Counter()
    while (message := queue.claim()) is not None:
        found[message.payload["n"]] += 1
        message.complete()
    return found


def test_given_a_put_applied_with_its_responses_lost_when_s3_stays_down_then_it_is_reported_unknown(
    through: Pail, proxy: ScriptedProxy, connect: Callable[..., Pail]
) -> None:
    script = LostResponses(heal_after=None)
    proxy.script = script
    payloads: list[Any] = [{"n": n} for n in range(8)]

    with pytest.raises(BatchEnqueueError) as caught:
        through.enqueue_many(payloads, max_workers=4)

    error = caught.value
    assert error.failed_indices == []  # nothing to re-send as a new job
    assert error.unknown_indices == [VICTIM]
    assert isinstance(error.errors[VICTIM], EnqueueUnknownError)
    job_id = error.unknown[VICTIM]
    assert error.ids[VICTIM] is None and script.key is not None and script.key.endswith(job_id)
    # Recovery, as documented, once S3 answers again: the unknown items under their ids.
    proxy.script = lambda request: Action.FORWARD
    again = through.enqueue_many(
        [payloads[i] for i in error.unknown_indices],
        ids=[error.unknown[i] for i in error.unknown_indices],
    )
    assert again == [job_id]
    assert pending_payloads(connect()) == Counter(range(8))  # each payload exactly once


def test_given_a_put_applied_with_its_responses_lost_when_s3_recovers_then_the_batch_resolves_it(
    through: Pail, proxy: ScriptedProxy, connect: Callable[..., Pail]
) -> None:
    # botocore makes 5 tries; the write sent once more after them gets through (412: it is there).
    script = LostResponses(heal_after=5)
    proxy.script = script
    payloads: list[Any] = [{"n": n} for n in range(8)]

    ids = through.enqueue_many(payloads, max_workers=4)

    assert len(set(ids)) == 8 and script.tries >= 6
    assert pending_payloads(connect()) == Counter(range(8))
