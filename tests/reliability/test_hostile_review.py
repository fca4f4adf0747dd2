"""The hostile review (issue 12), defect by defect, on the real local S3 server.

Each test is one defect of the review's list, reproduced through the public
API or the CLI: it failed before its fix and passes after. Defects 3, 4 and
7 are protocol races tested with the simulation and their own interleavings
(tests/simulation, tests/integration/test_protocol.py). The same file holds
the input bounds the issue and its siblings found (issue 18, defects 10 and
11; issue 14, rough edge 6).

The foreign-bytes rule as a whole (every hostile kind, in every prefix) is
tests/reliability/test_foreign_bytes.py.
"""

from __future__ import annotations

import gc
import json
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ulid import ULID

from pail import (
    BatchEnqueueError,
    ConfigurationError,
    DecodeError,
    JobState,
    Pail,
    PayloadError,
    RetryPolicy,
)
from pail.protocol.delay import delayed_key
from pail.status_page import cors_rule
from tests.reliability.conftest import Foreign
from tests.support.command import Invoke
from tests.support.hostile import REVIEW_BODIES, Hostile, hostile_id
from tests.support.waiting import wait_until

pytestmark = pytest.mark.s3


def _drain(pail: Pail, handler: Callable[[Any], Any], jobs: int, timeout: float = 60.0) -> int:
    """``pail.work`` until ``jobs`` were processed, or fail after ``timeout`` (never hangs)."""
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set)
    timer.start()
    try:
        processed = pail.work(
            handler, max_jobs=jobs, stop=stop, min_poll_interval=0.01, poll_interval=0.05
        )
    finally:
        timer.cancel()
    assert not stop.is_set(), f"work() was still short of {jobs} jobs after {timeout} s"
    return processed


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


# -- 1. One hostile entry blocks the whole queue --------------------------------------------


@pytest.mark.parametrize("hostile", REVIEW_BODIES, ids=lambda h: h.name)
def test_defect_01_given_a_hostile_entry_first_in_the_queue_when_working_then_it_is_dead_lettered_and_the_good_jobs_run(
    connect: Callable[..., Pail], foreign: Foreign, hostile: Hostile
) -> None:
    pail = connect(max_retries=0)
    bad = hostile_id(1)
    foreign(pail.keys.queue(bad), hostile.body)
    good = [pail.enqueue({"n": n}) for n in range(2)]
    before = pail.status(bad)  # it raised for these bodies

    processed = _drain(pail, lambda p: {"twice": p["n"] * 2}, jobs=2)

    assert processed == 2
    assert [pail.result(job_id) for job_id in good] == [{"twice": 0}, {"twice": 2}]
    assert before is not None and before.state is JobState.PENDING
    after = pail.status(bad)
    assert after is not None and after.state is JobState.FAILED
    [letter] = pail.dead_letters()
    assert letter.job_id == bad and letter.raw is not None and letter.quarantined
    assert letter.error is not None and letter.error.type in {"DecodeError", "PayloadError"}
    assert pail.stats().pending == 0


def test_defect_01_given_pailq_nan_payload_when_claimed_then_the_dead_letter_says_why_and_keeps_its_bytes(
    pail: Pail, foreign: Foreign
) -> None:
    bad = hostile_id(1)
    foreign(pail.keys.queue(bad), b'{"payload": {"x": NaN}, "attempts": 0}')

    assert pail.work_once(lambda p: p) is False  # nothing ran: the entry was not a job pail runs

    [letter] = pail.dead_letters()
    assert letter.error is not None and letter.error.type == "PayloadError"
    assert "NaN" in letter.error.message and "payload['x']" in letter.error.message
    assert letter.raw == '{"payload": {"x": NaN}, "attempts": 0}'


def test_defect_01_given_a_hostile_entry_first_when_pail_work_once_runs_then_it_exits_0_and_does_the_good_job(
    invoke: Invoke, pail: Pail, foreign: Foreign, bucket: str
) -> None:
    foreign(pail.keys.queue(hostile_id(1)), b'{"payload": {"x": NaN}, "attempts": 0}')
    good = pail.enqueue({"n": 4})

    result = invoke("work-once", bucket, "--handler", "tests.cli.handlers:double")

    assert result.exit_code == 0, result.output
    assert pail.result(good) == {"n": 8}


# -- 2. One hostile lease stops the reaper ----------------------------------------------------


def test_defect_02_given_hostile_leases_when_reaping_then_the_dead_workers_job_is_still_requeued(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(visibility_timeout=1)
    nan_lease, typed_lease = hostile_id(1), hostile_id(2)
    foreign(pail.keys.run(nan_lease), b'{"payload": {"x": NaN}, "attempts": 0}')
    foreign(pail.keys.run(typed_lease), b'{"payload": 1, "attempts": "x"}')
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None and message.id == job_id
    del message  # the worker dies: its heartbeat stops with the last reference
    gc.collect()

    requeued: list[str] = []

    def reaped_it() -> bool:
        requeued.extend(pail.reap().requeued_ids)
        return job_id in requeued

    wait_until(reaped_it, timeout=30, what="the reaper to requeue the dead worker's job")

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING
    for lease in (nan_lease, typed_lease):
        quarantined = pail.status(lease)
        assert quarantined is not None and quarantined.state is JobState.FAILED
    letters = {letter.job_id: letter for letter in pail.dead_letters()}
    assert letters[nan_lease].raw == '{"payload": {"x": NaN}, "attempts": 0}'
    typed_error = letters[typed_lease].error
    assert typed_error is not None and "attempts" in typed_error.message


# -- 5. redrive("") redrives every dead letter ------------------------------------------------


def test_defect_05_given_dead_letters_when_redrive_of_an_empty_id_then_configuration_error_and_none_move(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    for n in range(3):
        pail.enqueue({"n": n})
    while pail.work_once(lambda p: 1 / 0):
        pass
    assert len(pail.dead_letters()) == 3

    with pytest.raises(ConfigurationError, match="job id"):
        pail.redrive("")

    assert len(pail.dead_letters()) == 3
    assert pail.stats().failed == 3


# -- 6. A non-JSON progress value kills a live worker's heartbeat -----------------------------


def test_defect_06_given_a_running_job_when_progress_is_not_json_then_refused_at_once_and_the_heartbeat_lives(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(visibility_timeout=1.5)
    job_id = pail.enqueue({"n": 1})
    message = pail.claim()
    assert message is not None

    with pytest.raises(PayloadError, match="progress"):
        message.progress(datetime.now(UTC))
    with pytest.raises(PayloadError, match="NaN"):
        message.progress({"fraction": math.nan})
    message.progress({"step": 2})

    def renewed_with_progress() -> bool:
        status = pail.status(job_id)
        return status is not None and status.progress == {"step": 2}

    wait_until(renewed_with_progress, timeout=20, what="a renewal carrying the progress")
    assert not message.lease_lost
    assert message.complete({"ok": True}) is True
    assert pail.result(job_id) == {"ok": True}


# -- 8. A job delayed past 2286 runs at once; --delay nan / inf -------------------------------


@pytest.mark.parametrize(
    "when",
    [
        {"not_before": datetime(2300, 1, 1, tzinfo=UTC)},
        {"not_before": datetime(2286, 11, 20, 17, 46, 40, tzinfo=UTC)},
        {"delay": math.nan},
        {"delay": math.inf},
        {"delay": -1},
        {"delay": True},
        {"delay": "60"},
        {"delay": timedelta(days=365 * 300)},
        {"not_before": "2030-01-01"},
    ],
    ids=str,
)
def test_defect_08_given_a_due_time_out_of_bounds_when_enqueue_then_configuration_error_and_nothing_written(
    pail: Pail, when: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        pail.enqueue({"n": 1}, **when)

    assert pail.stats().pending == 0


def test_defect_08_given_the_last_due_time_the_key_holds_when_enqueue_then_the_job_waits(
    pail: Pail,
) -> None:
    last = datetime(2286, 11, 20, 17, 46, 39, tzinfo=UTC)

    job_id = pail.enqueue({"n": 1}, not_before=last)

    assert pail.work_once(lambda p: p) is False
    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING


@pytest.mark.parametrize("delay", ["nan", "inf", "-1", "1e400", "soon"])
def test_defect_08_given_a_bad_delay_on_the_cli_when_enqueue_then_usage_error_exit_2(
    invoke: Invoke, pail: Pail, bucket: str, delay: str
) -> None:
    result = invoke("enqueue", bucket, '{"n": 1}', "--delay", delay)

    assert result.exit_code == 2, result.output
    assert "delay" in result.output.lower()
    assert pail.stats().pending == 0


# -- 9. The status page contradicts status() ---------------------------------------------------


def test_defect_09_given_a_delayed_or_high_priority_job_when_status_urls_then_one_link_answers_with_the_entry(
    pail: Pail,
) -> None:
    import urllib.request

    delayed = pail.enqueue({"n": 1}, delay=3600)
    high = pail.enqueue({"n": 2}, priority="high")

    for job_id in (delayed, high):
        urls = pail.status_urls(job_id, expires_in=60)
        assert "delayed" in urls
        with urllib.request.urlopen(urls["delayed"], timeout=10) as answer:
            entry = json.loads(answer.read())
        assert "payload" in entry
        status = pail.status(job_id)
        assert status is not None and status.state is JobState.PENDING
    plain = pail.enqueue({"n": 3})
    assert "delayed" not in pail.status_urls(plain, expires_in=60)


def test_defect_09_given_a_cancelled_job_when_its_done_link_is_read_cross_origin_then_the_outcome_header_is_exposed(
    pail: Pail,
) -> None:
    import urllib.request

    job_id = pail.enqueue({"n": 1})
    assert pail.cancel(job_id) is True

    assert "x-amz-meta-pail-outcome" in cors_rule(["https://app.example"])["ExposeHeaders"]
    link = pail.status_urls(job_id, expires_in=60)["done"]
    with urllib.request.urlopen(link, timeout=10) as answer:
        assert answer.headers["x-amz-meta-pail-outcome"] == "cancelled"


# -- 10. redrive(all=True) aborts on one unreadable dlq/ object --------------------------------


def test_defect_10_given_unreadable_dlq_objects_when_redrive_all_then_the_readable_letters_are_redriven(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(max_retries=0)
    good = [pail.enqueue({"n": n}) for n in range(2)]
    while pail.work_once(lambda p: 1 / 0):
        pass
    foreign(pail.keys.prefix("dlq/"), b"")  # the S3 console's "folder"
    foreign(pail.keys.dlq(hostile_id(1)), b"")
    foreign(pail.keys.dlq(hostile_id(2)), b"<html>not a letter</html>")

    redriven = pail.redrive(all=True)

    assert sorted(redriven) == sorted(good)
    assert pail.stats().pending == 2
    unreadable = {letter.job_id: letter for letter in pail.dead_letters()}
    assert set(unreadable) == {hostile_id(1), hostile_id(2)}
    assert all(letter.quarantined for letter in unreadable.values())
    assert unreadable[hostile_id(2)].raw == "<html>not a letter</html>"
    with pytest.raises(DecodeError, match="unreadable"):
        pail.redrive(hostile_id(2))


# -- 11. stats().done counts cancelled jobs ----------------------------------------------------


def test_defect_11_given_cancelled_jobs_when_stats_then_they_count_as_cancelled_not_done(
    pail: Pail,
) -> None:
    done = pail.enqueue({"n": 1})
    assert pail.work_once(lambda p: p) is True
    cancelled = [pail.enqueue({"n": n}) for n in range(2)]
    for job_id in cancelled:
        assert pail.cancel(job_id) is True

    stats = pail.stats()

    assert (stats.done, stats.cancelled, stats.pending, stats.failed) == (1, 2, 0, 0)
    assert pail.result(done) == {"n": 1}


# -- 12. A handler result too deep for JSON kills the worker loop ------------------------------


def test_defect_12_given_a_handler_result_too_deep_when_working_then_the_attempt_fails_and_the_loop_goes_on(
    connect: Callable[..., Pail],
) -> None:
    pail = connect(max_retries=0)
    deep, plain = pail.enqueue({"deep": True}), pail.enqueue({"deep": False})

    def handler(payload: dict[str, bool]) -> Any:
        return _deep(5_000) if payload["deep"] else {"ok": True}

    assert _drain(pail, handler, jobs=2) == 2

    status = pail.status(deep)
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and status.error.type == "PayloadError"
    assert "nested more than" in status.error.message
    assert pail.result(plain) == {"ok": True}


@pytest.mark.parametrize("levels", [101, 5_000, 50_000])
def test_defect_12_given_a_payload_too_deep_when_enqueue_then_payload_error_and_nothing_written(
    pail: Pail, levels: int
) -> None:
    with pytest.raises(PayloadError, match="nested more than 100 levels"):
        pail.enqueue({"data": _deep(levels)})
    with pytest.raises(BatchEnqueueError) as batch:
        pail.enqueue_many([{"data": _deep(levels)}])
    assert isinstance(batch.value.errors[0], PayloadError)

    assert pail.stats().pending == 0
    pail.enqueue({"data": _deep(99)})  # the bound itself is fine
    assert pail.stats().pending == 1


@pytest.mark.parametrize(
    "payload",
    ["[" * 50_000 + "]" * 50_000, '{"data": ' + "[" * 101 + "]" * 101 + "}", '{"x": NaN}'],
    ids=["50000-deep", "101-deep", "nan"],
)
def test_defect_12_given_a_payload_json_cannot_carry_when_pail_enqueue_then_usage_error_exit_2(
    invoke: Invoke, pail: Pail, bucket: str, payload: str
) -> None:
    result = invoke("enqueue", bucket, payload)

    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: payload")
    assert pail.stats().pending == 0


# -- 13. RetryPolicy.delay overflows -----------------------------------------------------------


def test_defect_13_given_exponential_backoff_when_the_attempt_is_huge_then_the_delay_is_capped(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    policy = RetryPolicy.exponential(1, max_delay=60)
    assert policy.delay(1026) == 60.0
    assert policy.delay(10**9) == 60.0
    pail = connect(max_retries=None, retry_policy=policy)
    job_id = hostile_id(1)
    foreign(pail.keys.queue(job_id), b'{"payload": {"n": 1}, "attempts": 1025}')

    assert pail.work_once(lambda p: 1 / 0) is True  # attempt 1026 fails; the worker lives

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING and status.attempts == 1026
    assert status.error is not None and status.error.type == "ZeroDivisionError"


@pytest.mark.parametrize(
    "make",
    [
        lambda: RetryPolicy.exponential(math.nan),
        lambda: RetryPolicy.exponential(1, factor=math.inf),
        lambda: RetryPolicy.exponential(1, max_delay=math.inf),
        lambda: RetryPolicy.fixed(True),
        lambda: RetryPolicy.fixed(-1),
        lambda: RetryPolicy.exponential(1, jitter=math.nan),
        lambda: RetryPolicy.exponential(1, max_delay=10**12),
    ],
)
def test_defect_13_given_retry_policy_fields_out_of_bounds_then_configuration_error(
    make: Callable[[], RetryPolicy],
) -> None:
    with pytest.raises(ConfigurationError):
        make()


# -- 14. Unchecked expiry, visibility timeout, max_retries; folder markers ---------------------


@pytest.mark.parametrize("expires_in", [0, -5, 30 * 86400, True, 1.5, math.nan])
def test_defect_14_given_an_expiry_outside_1_to_604800_when_presigning_then_configuration_error(
    pail: Pail, expires_in: Any
) -> None:
    job_id = pail.enqueue({"n": 1})

    with pytest.raises(ConfigurationError, match="604800"):
        pail.result_url(job_id, expires_in=expires_in)
    with pytest.raises(ConfigurationError, match="604800"):
        pail.status_urls(job_id, expires_in=expires_in)


@pytest.mark.parametrize(
    "options",
    [
        {"visibility_timeout": math.inf},
        {"visibility_timeout": 1e300},
        {"visibility_timeout": math.nan},
        {"visibility_timeout": True},
        {"max_retries": 2.5},
        {"max_retries": True},
        {"max_retries": "3"},
    ],
    ids=str,
)
def test_defect_14_given_settings_out_of_bounds_when_connect_then_configuration_error(
    connect: Callable[..., Pail], options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        connect(**options)


@pytest.mark.parametrize(
    "call",
    [
        lambda pail: pail.work(lambda p: p, poll_interval=math.nan, max_jobs=1),
        lambda pail: pail.work(lambda p: p, min_poll_interval=math.inf, max_jobs=1),
        lambda pail: pail.work(lambda p: p, max_jobs=2.5),
        lambda pail: pail.work_once(lambda p: p, job_timeout=math.inf),
        lambda pail: pail.work_once(lambda p: p, job_timeout=0),
        lambda pail: pail.dead_letters(limit=-1),
        lambda pail: pail.enqueue_many([{"n": 1}], max_workers=True),
        lambda pail: RetryPolicy.fixed(1).delay(-1),
        lambda pail: pail.jobs("pending", limit=0),
        lambda pail: pail.purge(limit=-1),
    ],
    ids=[
        "work-poll-nan",
        "work-floor-inf",
        "work-max-jobs-float",
        "work-once-timeout-inf",
        "work-once-timeout-0",
        "dead-letters-limit",
        "enqueue-many-workers",
        "retry-delay-attempt",
        "jobs-limit",
        "purge-limit",
    ],
)
def test_defect_14_given_any_other_number_out_of_bounds_when_called_then_configuration_error_first(
    pail: Pail, call: Callable[[Pail], Any]
) -> None:
    job_id = pail.enqueue({"n": 1})

    with pytest.raises(ConfigurationError):
        call(pail)

    status = pail.status(job_id)
    assert status is not None and status.state is JobState.PENDING  # nothing ran


def test_defect_14_given_console_folder_markers_when_counting_and_working_then_they_are_not_jobs(
    connect: Callable[..., Pail], foreign: Foreign
) -> None:
    pail = connect(visibility_timeout=1)
    for prefix in ("queue/", "run/", "done/", "dlq/"):
        foreign(pail.keys.prefix(prefix), b"")

    stats = pail.stats()
    assert (stats.pending, stats.running, stats.done, stats.failed) == (0, 0, 0, 0)
    assert pail.work_once(lambda p: p) is False

    def markers_survive_an_expired_pass() -> bool:
        report = pail.reap()
        assert report.requeued == report.dead_lettered == report.cleaned == 0
        return pail.store.head(pail.keys.prefix("run/")) is not None and report.scanned == 0

    wait_until(markers_survive_an_expired_pass, timeout=5, what="a reaper pass")
    assert pail.store.head(pail.keys.prefix("run/")) is not None  # not taken for a success
    assert pail.dead_letters() == []
    assert pail.redrive(all=True) == []


# -- Issue 18, defect 10: oldest_pending ignores delayed and high-priority entries -------------


def test_issue18_defect_10_given_only_high_priority_and_due_delayed_jobs_when_stats_then_oldest_pending_is_set(
    pail: Pail, foreign: Foreign
) -> None:
    high = pail.enqueue({"n": 1}, priority="high")
    pail.enqueue({"n": 3}, delay=3600)  # not due: it is not waiting yet
    # A delayed job due five minutes ago that no claimer has promoted yet.
    due_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    waiting = str(ULID.from_datetime(due_at - timedelta(minutes=5)))
    due_key = delayed_key(pail.keys, due_at, waiting)
    foreign(due_key, json.dumps({"payload": {"n": 2}, "attempts": 0}).encode())

    stats = pail.stats()

    # Pending: the two a worker could claim now; delayed: the one not due (pail.stats.STATES).
    assert (stats.pending, stats.delayed) == (2, 1)
    # Both wait since their entry was written (the due one's due time is earlier still):
    # the high-priority entry, written first, is the oldest, on the server's clock.
    listed = pail.store.list(pail.keys.prefix("queue/")).items
    written = next(item for item in listed if high in item.key)
    assert stats.oldest_pending_at == written.last_modified
    assert stats.oldest_pending is not None and stats.oldest_pending.total_seconds() >= 0


# -- Issue 18, defect 11: a dedup key that cannot be encoded -----------------------------------


def test_issue18_defect_11_given_a_key_with_a_lone_surrogate_when_enqueue_then_configuration_error(
    pail: Pail,
) -> None:
    with pytest.raises(ConfigurationError, match="UTF-8"):
        pail.enqueue({"n": 1}, key="order-\udcff")

    assert pail.stats().pending == 0


def test_issue18_defect_11_given_an_undecodable_key_argument_when_pail_enqueue_key_then_exit_2(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    # What invalid UTF-8 in argv becomes in Python (surrogateescape).
    result = invoke(
        "enqueue", bucket, '{"n": 1}', "--key", b"order-\xff".decode(errors="surrogateescape")
    )

    assert result.exit_code == 2, result.output
    assert "UTF-8" in result.output
    assert pail.stats().pending == 0


# -- Issue 14, rough edge 6: stats has a delayed column and a cancelled count ------------------


def test_issue14_edge_6_given_delayed_and_cancelled_jobs_when_pail_stats_then_columns_show_them(
    invoke: Invoke, pail: Pail, bucket: str
) -> None:
    pail.enqueue({"n": 1}, delay=3600)
    pail.enqueue({"n": 2})
    assert pail.cancel(pail.enqueue({"n": 3})) is True

    as_json = json.loads(invoke("stats", bucket, "--json").stdout)
    table = invoke("stats", bucket).stdout

    # The delayed job is not pending (pail.stats.STATES: each job in one state).
    assert (as_json["pending"], as_json["delayed"], as_json["cancelled"], as_json["done"]) == (
        1,
        1,
        1,
        0,
    )
    assert "delayed" in table and "cancelled" in table
