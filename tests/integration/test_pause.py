"""Pausing a queue on the real local S3 server: what claimers do, and what the check costs.

The figures in ``docs/protocol.md`` ("Pause and resume") come from here: a
pause check is one HEAD per page refill that found jobs, so one worker
claiming a backlog pays one HEAD per page of up to 1,000 claims.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pail import Pail


class PauseHeads:
    """Counts requests by (operation, key kind) on a client: pause-marker HEADs apart."""

    def __init__(self, pail: Pail) -> None:
        self.calls: Counter[str] = Counter()
        self._marker = pail.keys.paused()
        pail.store.client.meta.events.register(  # type: ignore[attr-defined]
            "before-parameter-build.s3", self._before
        )

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        marker = model.name == "HeadObject" and params.get("Key") == self._marker
        self.calls["pause HEAD" if marker else model.name] += 1


def test_given_a_backlog_when_one_worker_claims_it_then_one_pause_head_per_page_refill(
    pail: Pail,
) -> None:
    pail.enqueue_many([{"n": n} for n in range(100)])
    counted = PauseHeads(pail)

    claimed = 0
    while (message := pail.claim()) is not None:
        message.complete({"ok": True})
        claimed += 1

    assert claimed == 100
    # One listing served all 100 claims; the last claim's listing found the queue empty,
    # which costs no HEAD: 1 pause check for 100 claims. The third and fourth LISTs are the
    # first claim's reclaim pass over run/ and wait/ (pail.protocol.reclaim: once per
    # visibility timeout).
    assert counted.calls["ListObjectsV2"] == 4
    assert counted.calls["pause HEAD"] == 1


def test_given_an_idle_paused_worker_when_it_polls_then_each_poll_is_one_list_and_one_head(
    pail: Pail,
) -> None:
    pail.enqueue({"n": 1})
    pail.pause()
    counted = PauseHeads(pail)

    polls = [pail.claim() for _ in range(5)]

    assert polls == [None] * 5 and pail.claims_paused
    # Two LISTs more: the first claim's reclaim pass over run/ and wait/ (then throttled
    # for 30 s).
    assert counted.calls == Counter({"ListObjectsV2": 5 + 2, "pause HEAD": 5})


def test_given_a_worker_holding_a_page_when_paused_then_it_claims_only_from_that_page_until_resumed(
    connect: Callable[..., Pail],
) -> None:
    holder, fresh, operator = connect(), connect(), connect()
    operator.enqueue_many([{"n": n} for n in range(4)])
    first = holder.claim()  # lists the page of 4 and keeps it
    assert first is not None

    assert operator.pause("maintenance")
    second = holder.claim()  # the pause is honoured within one refill: this page is walked
    refused = fresh.claim()  # a refill that sees the pause claims nothing
    holder._claimer().forget()
    after_refill = holder.claim()

    assert second is not None and refused is None and after_refill is None
    assert fresh.claims_paused and holder.claims_paused
    first.complete({"ran": 1})  # jobs claimed before the pause finish as usual
    second.complete({"ran": 2})
    assert operator.stats().pending == 2

    assert operator.resume()
    resumed = [fresh.claim(), holder.claim()]  # resuming is seen at the next refill

    assert all(message is not None for message in resumed)
    assert fresh.paused() is None
    for message in resumed:
        assert message is not None
        message.complete({"ran": 3})
    assert operator.stats().done == 4
