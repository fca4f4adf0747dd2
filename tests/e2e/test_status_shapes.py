"""The JSON the status page reads, fetched through presigned URLs as the page does.

``docs/status-page.md`` documents these shapes; if the runtime changes
them, these tests fail before the page does.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from pail import Pail
from pail.local import LocalS3
from tests.support.queues import connect_to

pytestmark = pytest.mark.s3

ERROR_KEYS = {"type", "message", "traceback", "attempt"}


def read(urls: dict[str, str]) -> dict[str, Any]:
    """Every state's answer: its JSON body if 200, else its HTTP status."""
    seen: dict[str, Any] = {}
    for state, url in urls.items():
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                seen[state] = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            seen[state] = exc.code
    return seen


@pytest.fixture
def pail(s3_server: LocalS3, bucket: str) -> Pail:
    return connect_to(s3_server.connect_kwargs(), bucket, max_retries=1)


def test_given_a_new_job_then_only_pending_answers_with_the_envelope(pail: Pail) -> None:
    job_id = pail.enqueue({"report": "q3"})
    seen = read(pail.status_urls(job_id))
    assert seen["running"] == seen["done"] == seen["failed"] == 404
    pending = seen["pending"]
    assert {"payload", "attempts", "v", "enqueued_at", "w"} <= pending.keys()
    assert pending["payload"] == {"report": "q3"}
    assert pending["attempts"] == 0
    assert "last_error" not in pending


def test_given_a_claimed_job_with_progress_then_running_answers_with_the_lease(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q3"})
    message = pail.claim()
    assert message is not None
    message.progress({"done": 1, "total": 4})
    message.lease.renew()
    seen = read(pail.status_urls(job_id))
    assert seen["pending"] == seen["done"] == seen["failed"] == 404
    running = seen["running"]
    expected = {"v", "id", "payload", "attempts", "owner", "lease", "state", "enqueued_at", "w"}
    assert expected <= running.keys()
    assert (running["id"], running["attempts"], running["state"]) == (job_id, 1, "running")
    assert running["progress"] == {"done": 1, "total": 4}
    assert message.complete({"ok": True})


def test_given_a_failed_attempt_with_retries_left_then_pending_carries_the_last_error(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q3"})
    message = pail.claim()
    assert message is not None
    message.fail(ValueError("boom"))
    pending = read(pail.status_urls(job_id))["pending"]
    assert pending["attempts"] == 1
    assert pending["last_error"].keys() == ERROR_KEYS
    assert (pending["last_error"]["type"], pending["last_error"]["message"]) == (
        "ValueError",
        "boom",
    )
    assert pending["last_error"]["attempt"] == 1


def test_given_a_waiting_job_then_waiting_answers_with_its_record(pail: Pail) -> None:
    flow = pail.enqueue_flow([{"n": 1}, {"n": 2}], then={"merge": True})
    assert pail.work_once(lambda payload: {"ok": True})

    seen = read(pail.status_urls(flow.then))

    assert {state: answer for state, answer in seen.items() if state != "waiting"} == {
        "pending": 404,
        "running": 404,
        "done": 404,
        "failed": 404,
    }
    record = seen["waiting"]
    assert record["payload"] == {"merge": True}
    assert sorted(record["after"]) == sorted(flow.children) and len(record["met"]) == 1


def test_given_a_done_job_then_done_answers_with_the_result_itself(pail: Pail) -> None:
    first = pail.enqueue({"n": 1})
    assert pail.work_once(lambda payload: {"rows": 3})
    second = pail.enqueue({"n": 2})
    assert pail.work_once(lambda payload: None)
    pail.flush()  # the lease's removal, which work_once leaves in flight
    assert read(pail.status_urls(first)) == {
        "pending": 404,
        "running": 404,
        "done": {"rows": 3},
        "failed": 404,
    }
    assert read(pail.status_urls(second))["done"] == {}  # a None result is stored as {}


def test_given_a_dead_lettered_job_then_done_is_null_and_failed_has_the_error(
    pail: Pail,
) -> None:
    job_id = pail.enqueue({"report": "q3"})

    def broken(payload: Any) -> None:
        raise KeyError("template")

    assert pail.work_once(broken) and pail.work_once(broken)
    seen = read(pail.status_urls(job_id))
    assert seen["pending"] == seen["running"] == 404
    assert seen["done"] is None  # the dead marker: look at failed
    failed = seen["failed"]
    assert {"v", "id", "payload", "attempts", "error", "enqueued_at", "w"} <= failed.keys()
    assert (failed["id"], failed["attempts"], failed["payload"]) == (job_id, 2, {"report": "q3"})
    assert failed["error"].keys() == ERROR_KEYS
    assert failed["error"]["type"] == "KeyError"
    assert failed["error"]["attempt"] == 2
