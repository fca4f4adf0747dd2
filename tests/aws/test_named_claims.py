"""The named claim: a worker woken by an S3 event claims the entry the event names, with no listing.

``Pail.claim_key`` (``pail.protocol.claim``, "A named candidate") and the
drain's claim around it (``pail.aws.named.NamedFirst``), on a store that
records its requests, so each case shows exactly what it costs.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pail import JobState, Pail
from pail.aws.lambda_worker import lambda_worker
from pail.aws.named import MAX_NAMED_KEYS, NamedFirst
from pail.drain import ProcessLimits, drain
from pail.keys import QUEUE
from pail.message import Message
from pail.protocol.claim import Named
from tests.support.lambdas import FakeContext, LogCapture
from tests.support.recording_store import RecordingStore


def double(payload: dict[str, Any]) -> dict[str, Any]:
    return {"doubled": payload["n"] * 2}


def queue_on(store: RecordingStore, **kwargs: Any) -> Pail:
    """A queue told its shard count, as the construct's functions are (no layout marker read)."""
    return Pail(store, visibility_timeout=30, **{"shards": 1, **kwargs})


def pending_keys(store: RecordingStore) -> list[str]:
    return [key for key in sorted(store.keys()) if key.startswith(QUEUE)]


def s3_event(*keys: str) -> dict[str, Any]:
    """An S3 notification as Lambda receives it straight from the bucket."""
    return {
        "Records": [
            {"eventSource": "aws:s3", "s3": {"object": {"key": key.replace(" ", "+")}}}
            for key in keys
        ]
    }


def drain_named(pail: Pail, keys: list[str]) -> tuple[int, str | None, NamedFirst[Message]]:
    claims = NamedFirst(pail, keys)
    limits = ProcessLimits(time_budget=None, grace_period=1, stop=None)
    tally = drain(claims, double, limits, paused=lambda: pail.claims_paused, flush=pail.flush)
    return tally.processed, tally.stop_reason, claims


# --- Pail.claim_key ---------------------------------------------------------------------


def test_given_a_pending_entry_when_claimed_by_its_key_then_it_is_ours_without_a_listing() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 4})
    store.clear()

    message = pail.claim_key(pail.keys.queue(job))

    assert message is not None and message.id == job and message.payload == {"n": 4}
    assert pail.named_claim_found is Named.CLAIMED
    assert Counter(store.calls) == Counter(
        [
            ("get", f"queue/{job}"),
            ("head", "_pail/paused"),
            ("get", "_pail/limits"),  # beside the HEAD; at most once per limits.gate.REFRESH
            ("put", f"run/{job}"),
            ("delete", f"queue/{job}"),
            ("head", f"done/{job}"),
        ]
    )
    assert message.complete({"ok": True})
    assert pail.result(job) == {"ok": True}


def test_given_an_entry_already_taken_when_claimed_by_its_key_then_one_get_and_nothing_else() -> (
    None
):
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    assert pail.work_once(double) and pail.flush()
    store.clear()

    assert pail.claim_key(pail.keys.queue(job)) is None

    assert pail.named_claim_found is Named.GONE
    assert store.calls == [("get", f"queue/{job}")]


def test_given_a_live_lease_when_its_entry_is_claimed_by_key_then_it_is_taken_not_run_twice() -> (
    None
):
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    holder = queue_on(store).claim()
    assert holder is not None
    # The job's entry comes back beside the live lease, as a late producer resend would write it.
    store.put(pail.keys.queue(job), store.get(f"run/{job}").body)  # type: ignore[union-attr]

    assert pail.claim_key(pail.keys.queue(job)) is None

    assert pail.named_claim_found is Named.TAKEN
    assert holder.complete({"by": "the holder"})
    assert pail.result(job) == {"by": "the holder"}


def test_given_a_sharded_queue_when_a_shard_s_entry_is_claimed_by_key_then_it_stays_in_its_shard() -> (
    None
):
    store = RecordingStore()
    pail = queue_on(store, shards=4)
    job = pail.enqueue({"n": 3})
    key = pail.keys.queue(job)
    assert key.count("/") == 2  # queue/{s}/{id}
    store.clear()

    message = pail.claim_key(key)

    assert message is not None and message.id == job
    assert message.lease.key == key.replace("queue/", "run/", 1)
    assert not any(operation == "list" for operation, _ in store.calls)
    assert message.complete({"ok": 3})
    assert pail.result(job) == {"ok": 3}
    assert store.head(key.replace("queue/", "done/", 1)) is not None


def test_given_a_job_of_the_flat_layout_when_a_sharded_queue_claims_its_key_then_it_runs() -> None:
    store = RecordingStore()
    job = queue_on(store).enqueue({"n": 5})  # enqueued before the queue was sharded
    pail = queue_on(store, shards=2)

    message = pail.claim_key(f"queue/{job}")

    assert message is not None and message.complete(double(message.payload))
    assert pail.result(job) == {"doubled": 10}


def test_given_a_namespace_when_claimed_by_key_then_only_its_own_keys_are_claimed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore()
    reports = queue_on(store, queue="reports")
    default = queue_on(store)
    job = reports.enqueue({"n": 2})
    store.clear()

    with caplog.at_level(logging.WARNING, logger="pail"):
        assert default.claim_key(reports.keys.queue(job)) is None
    assert default.named_claim_found is Named.FOREIGN
    assert store.calls == []
    assert f"skipping 'reports/queue/{job}'" in caplog.text

    message = reports.claim_key(reports.keys.queue(job))
    assert message is not None and message.id == job


@pytest.mark.parametrize(
    "key",
    [
        "queue/",
        "queue/reports/",
        "queue/a/b",
        "done/01J0000000000000000000000A",
        "",
        "_pail/paused",
    ],
)
def test_given_a_key_of_no_pending_job_when_claimed_by_key_then_it_is_skipped_with_a_log_line(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RecordingStore()
    pail = queue_on(store)
    pail.enqueue({"n": 1})
    store.clear()

    with caplog.at_level(logging.WARNING, logger="pail"):
        assert pail.claim_key(key) is None

    assert pail.named_claim_found is Named.FOREIGN
    assert store.calls == []
    assert "skipping" in caplog.text


def test_given_a_paused_queue_when_claimed_by_key_then_nothing_is_claimed() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    pail.pause("deploying")
    store.clear()

    assert pail.claim_key(pail.keys.queue(job)) is None

    assert (pail.named_claim_found, pail.claims_paused) == (Named.PAUSED, True)
    # The limits' GET goes beside the pause's HEAD (at most once per limits.gate.REFRESH).
    assert store.calls[0] == ("get", f"queue/{job}")
    assert sorted(store.calls[1:]) == [("get", "_pail/limits"), ("head", "_pail/paused")]
    status = pail.status(job)
    assert status is not None and status.state is JobState.PENDING


def test_given_a_high_priority_entry_when_claimed_by_key_then_it_is_promoted_and_claimed() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 6}, priority="high")
    (key,) = pending_keys(store)
    assert key == f"queue/!0000000000000-{job}"

    message = pail.claim_key(key)

    assert message is not None and message.id == job and message.payload == {"n": 6}
    assert store.head(key) is None


def test_given_a_delayed_entry_when_claimed_by_key_then_no_request_is_made() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    later = pail.enqueue({"n": 1}, delay=3600)
    earlier = pail.enqueue({"n": 2}, not_before=datetime.now(UTC) - timedelta(minutes=1))
    later_key, earlier_key = (
        next(k for k in pending_keys(store) if k.endswith(job)) for job in (later, earlier)
    )
    store.clear()

    assert (pail.claim_key(later_key), pail.named_claim_found) == (None, Named.WAITING)
    # Due by this worker's clock: for a listing to promote, by the server's.
    assert (pail.claim_key(earlier_key), pail.named_claim_found) == (None, Named.DUE)
    assert store.calls == []


def test_given_foreign_bytes_at_the_named_key_when_claimed_by_key_then_they_are_quarantined() -> (
    None
):
    store = RecordingStore()
    pail = queue_on(store)
    store.put("queue/01J0000000000000000000000Z", b"\xff not a job")

    assert pail.claim_key("queue/01J0000000000000000000000Z") is None

    assert pail.named_claim_found is Named.CLEARED
    (letter,) = pail.dead_letters()
    assert letter.job_id == "01J0000000000000000000000Z" and letter.raw is not None


def test_given_a_cancelled_job_when_claimed_by_key_then_it_never_runs() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    assert pail.cancel(job)

    assert pail.claim_key(pail.keys.queue(job)) is None

    assert pail.named_claim_found in {Named.GONE, Named.TAKEN}
    status = pail.status(job)
    assert status is not None and status.state is JobState.CANCELLED


# --- NamedFirst: what a woken drain claims ---------------------------------------------


def test_given_it_wins_its_job_when_draining_then_it_lists_for_the_rest() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    jobs = [pail.enqueue({"n": n}) for n in range(3)]

    processed, reason, claims = drain_named(pail, [pail.keys.queue(jobs[0])])

    assert (processed, reason) == (3, "empty")
    assert claims.found == {"claimed": 1}
    assert [pail.result(job) for job in jobs] == [{"doubled": 2 * n} for n in range(3)]


def test_given_its_job_was_run_when_woken_then_it_returns_after_one_get() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    assert pail.work_once(double) and pail.flush()
    waiting = pail.enqueue({"n": 2})  # its own event wakes its own worker
    store.clear()

    processed, reason, claims = drain_named(pail, [pail.keys.queue(job)])

    assert (processed, reason) == (0, "empty")
    assert claims.found == {"gone": 1}
    assert store.calls == [("get", f"queue/{job}")]
    assert pail.result(waiting) is None


def test_given_an_event_naming_nothing_of_this_queue_when_woken_then_it_drains_by_listing() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})

    processed, _, claims = drain_named(pail, ["queue/", "other/queue/x"])

    assert processed == 1 and claims.found == {"foreign": 2}
    assert pail.result(job) == {"doubled": 2}
    assert processed == drain_named(pail, [])[0] + 1  # no key at all lists too (and finds none)


def test_given_a_due_delayed_entry_when_woken_then_a_listing_promotes_and_runs_it() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 3}, not_before=datetime.now(UTC) - timedelta(seconds=1))
    (key,) = pending_keys(store)

    processed, _, claims = drain_named(pail, [key])

    assert processed == 1 and claims.found == {"due": 1}
    assert pail.result(job) == {"doubled": 6}


def test_given_more_keys_than_it_claims_by_name_when_woken_then_it_lists_for_the_others() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    jobs = [pail.enqueue({"n": n}) for n in range(3)]
    gone = [f"queue/01J{n:023d}" for n in range(MAX_NAMED_KEYS)]

    processed, _, claims = drain_named(pail, [*gone, *(pail.keys.queue(j) for j in jobs)])

    assert claims.found == {"gone": MAX_NAMED_KEYS}
    assert processed == 3


def test_given_a_repeated_key_when_woken_then_it_is_claimed_once() -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    key = pail.keys.queue(job)

    processed, _, claims = drain_named(pail, [key, key, key])

    assert processed == 1 and claims.found == {"claimed": 1}


# --- the worker Lambda -----------------------------------------------------------------


def test_given_an_s3_notification_when_the_worker_lambda_is_invoked_then_it_claims_that_job_first(
    log_capture: LogCapture,
) -> None:
    store = RecordingStore()
    pail = queue_on(store, queue="my-queue")
    jobs = [pail.enqueue({"n": n}) for n in range(2)]
    handler = lambda_worker(double, pail=pail, logger=log_capture.logger)
    store.clear()

    summary = handler(s3_event(pail.keys.queue(jobs[1])), FakeContext(remaining=900))

    assert (summary["trigger"], summary["processed"], summary["stop_reason"]) == ("s3", 2, "empty")
    assert store.calls[0] == ("get", pail.keys.queue(jobs[1]))  # before any listing
    finished = [r for r in log_capture.records() if r["message"] == "worker finished"]
    assert finished[-1]["named"] == {"claimed": 1}


def test_given_a_late_event_when_the_worker_lambda_is_invoked_then_one_get_and_it_returns(
    log_capture: LogCapture,
) -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    assert pail.work_once(double) and pail.flush()
    handler = lambda_worker(double, pail=pail, logger=log_capture.logger)
    store.clear()

    summary = handler(s3_event(pail.keys.queue(job)), FakeContext(remaining=900))

    assert (summary["processed"], summary["stop_reason"]) == (0, "empty")
    assert store.calls == [("get", f"queue/{job}")]


def test_given_a_paused_queue_when_an_event_wakes_the_worker_lambda_then_it_stops_as_paused(
    log_capture: LogCapture,
) -> None:
    store = RecordingStore()
    pail = queue_on(store)
    job = pail.enqueue({"n": 1})
    pail.pause()
    handler = lambda_worker(double, pail=pail, logger=log_capture.logger)

    summary = handler(s3_event(pail.keys.queue(job)), FakeContext(remaining=900))

    assert (summary["processed"], summary["stop_reason"]) == (0, "paused")
    pail.resume()
    assert handler(s3_event(pail.keys.queue(job)), FakeContext(remaining=900))["processed"] == 1
