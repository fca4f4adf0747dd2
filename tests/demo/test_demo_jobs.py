"""The demo's batch and handler, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from pail.cli.local import should_hold
from pail.demo.jobs import (
    RETIRED_SOURCE,
    RetiredSourceError,
    WarehouseTimeoutError,
    build_batch,
    handle,
    ledger_attempts,
    record_attempt,
)


def test_given_default_batch_when_built_then_200_jobs_with_5_flaky_1_poison_and_the_long_first() -> (
    None
):
    batch = build_batch()

    assert len(batch.payloads) == 200
    assert batch.long == 0 and batch.payloads[0]["steps"] == 500
    assert batch.payloads[batch.poison]["source"] == RETIRED_SOURCE
    assert len(batch.flaky) == 5
    assert all(batch.payloads[i]["replica_timeouts"] == 2 for i in batch.flaky)
    assert batch.poison not in batch.flaky and batch.long not in batch.flaky
    assert len({p.get("report_id") for p in batch.payloads if p["kind"] == "report"}) == sum(
        1 for p in batch.payloads if p["kind"] == "report"
    )


def test_given_same_seed_when_built_twice_then_identical() -> None:
    assert build_batch(50, seed=3) == build_batch(50, seed=3)


def test_given_too_few_jobs_when_built_then_rejected() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        build_batch(5)


def test_given_flaky_report_and_ledger_when_handled_then_fails_twice_then_succeeds(
    tmp_path: Path,
) -> None:
    payload = {
        "kind": "report",
        "report_id": "r1",
        "format": "csv",
        "rows": 10,
        "replica_timeouts": 2,
    }

    for attempt in (1, 2):
        with pytest.raises(WarehouseTimeoutError, match=f"attempt {attempt}"):
            handle(payload, ledger=tmp_path)
    assert handle(payload, ledger=tmp_path)["url"] == "reports/r1.csv"
    assert ledger_attempts(tmp_path) == {"r1": 3}


def test_given_poison_report_when_handled_then_always_raises() -> None:
    payload = {"kind": "report", "report_id": "p", "source": RETIRED_SOURCE}

    for _ in range(3):
        with pytest.raises(RetiredSourceError, match="was retired"):
            handle(payload)


def test_given_simulation_when_handled_then_deterministic_result() -> None:
    payload = {"kind": "simulation", "scenario": "bull_run", "agents": 500, "steps": 3, "seed": 9}

    assert handle(payload) == handle(payload)
    assert handle(payload)["steps"] == 3


def test_given_existing_attempts_when_recording_then_numbers_continue(tmp_path: Path) -> None:
    assert [record_attempt(tmp_path, "job") for _ in range(3)] == [1, 2, 3]
    assert record_attempt(tmp_path, "other") == 1


@pytest.mark.parametrize(
    ("flag", "interactive", "json_mode", "expected"),
    [
        (None, True, False, True),  # a person at a terminal: keep the server for them
        (None, False, False, False),  # CI, a pipe: finish and exit
        (None, True, True, False),  # --json is for scripts
        (True, False, False, True),  # --hold wins
        (False, True, False, False),  # --no-hold wins
    ],
)
def test_given_hold_flag_and_terminal_when_deciding_then_the_server_is_held_only_for_people(
    flag: bool | None, interactive: bool, json_mode: bool, expected: bool
) -> None:
    assert should_hold(flag, interactive=interactive, json_mode=json_mode) is expected


def test_given_the_demo_s_workers_when_connected_then_they_leave_expired_leases_to_its_reaper() -> (
    None
):
    # The demo tells the reaper's reclaim of the killed worker's lease; a worker's
    # own reclaim pass (on by default) raced it for that lease on a loaded machine.
    from pail.demo.fleet import WorkerSpec

    endpoint = {
        "endpoint_url": "http://127.0.0.1:9",
        "access_key_id": "k",
        "secret_access_key": "s",
        "region": "us-east-1",
    }
    spec = WorkerSpec("pail-demo", endpoint, 3.0, 3, "ledger", "logs")

    assert spec.connect().reclaims is False
