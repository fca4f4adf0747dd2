"""The chaos audit's rules on hand-made records: each violation is caught, each real cause explains.

The records are what ``worker_main`` writes (``audit.start_line``/``end_line``);
times are ``time.monotonic()`` seconds. The chaos run itself, and known-bad
workers through it, are in ``test_chaos.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.chaos.audit import (
    KILLED,
    KILLED_SETTLING,
    UNRECORDED,
    ZOMBIE,
    Audit,
    audit,
    complete_lines,
    end_line,
    read_executions,
    start_line,
)

JOB = "01J0000000000000000000000A"


def lease(token: str | None, live: float | None, attempt: int = 1) -> dict[str, object] | None:
    if token is None:
        return None
    return {
        "job": JOB,
        "attempt": attempt,
        "lease": token,
        "owner": "w",
        "lost": False,
        "live": live,
    }


def run(lines: list[str], kills: dict[int, float] | None = None, winner: str | None = "b") -> Audit:
    return audit(read_executions(lines), kills or {}, {7: winner})


def test_given_a_second_run_after_the_first_lease_expired_and_a_kill_then_explained() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),  # killed at 10.1, lease until 11.5
            start_line(7, 200, 13.0, lease("b", 14.5, 2), JOB),
            end_line(7, 200, 13.1, lease("b", 14.4, 2)),
        ],
        kills={100: 10.1},
    )

    assert found.violations == []
    assert found.duplicates == {KILLED: 1}
    assert (found.executions, found.jobs_run) == (2, 1)


def test_given_a_second_run_inside_a_killed_runs_live_lease_then_a_violation() -> None:
    # Killed at once, but its lease lives on in run/ until it expires: nobody may claim it yet.
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            start_line(7, 200, 10.5, lease("b", 12), JOB),
        ],
        kills={100: 10.1},
    )

    assert found.kinds == {"overlap with a live lease": 1}
    assert "(over) was live until" in found.violations[0]


def test_given_two_runs_at_once_both_with_live_leases_then_a_violation() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            start_line(7, 200, 10.2, lease("b", 11.7), JOB),
            end_line(7, 100, 10.4, lease("a", 11.5)),
            end_line(7, 200, 10.6, lease("b", 11.7)),
        ]
    )

    assert found.kinds == {"overlap with a live lease": 1}
    assert "(still running)" in found.violations[0]


def test_given_a_renewal_seen_at_the_end_then_the_lease_counts_as_live_that_long() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            end_line(7, 100, 13.0, lease("a", 14.0)),  # renewed while it ran
            start_line(7, 200, 13.5, lease("b", 15.0), JOB),
        ]
    )

    assert found.kinds == {"overlap with a live lease": 1}


def test_given_a_zombie_whose_lease_expired_then_the_overlap_is_explained() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            start_line(7, 200, 13.0, lease("b", 14.5), JOB),  # the first still runs
            end_line(7, 200, 13.1, lease("b", 14.4)),
            end_line(7, 100, 14.0, lease("a", None)),  # it learnt it lost the lease
        ]
    )

    assert found.violations == []
    assert found.duplicates == {ZOMBIE: 1}


def test_given_a_result_not_recorded_then_the_next_run_after_expiry_is_explained() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            end_line(7, 100, 10.1, lease("a", 11.5)),
            start_line(7, 200, 13.0, lease("b", 14.5), JOB),
        ]
    )

    assert found.violations == [] and found.duplicates == {UNRECORDED: 1}


def test_given_a_kill_after_the_handler_ended_then_it_is_told_apart() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            end_line(7, 100, 10.1, lease("a", 11.5)),
            start_line(7, 200, 13.0, lease("b", 14.5), JOB),
        ],
        kills={100: 10.2},
    )

    assert found.violations == [] and found.duplicates == {KILLED_SETTLING: 1}


def test_given_a_run_without_a_lease_then_it_and_the_duplicate_after_it_are_violations() -> None:
    found = run(
        [
            start_line(7, 300, 10.0, None, JOB),  # a handler run outside any claim
            end_line(7, 300, 10.1, None),
            start_line(7, 200, 10.2, lease("b", 11.7), JOB),
        ]
    )

    assert found.kinds == {"ran without a lease": 1, "unexplained duplicate": 1}


def test_given_a_result_whose_lease_no_run_held_then_a_violation() -> None:
    found = run([start_line(7, 200, 10.2, lease("b", 11.7), JOB)], winner="forged")

    assert found.kinds == {"result without a run": 1}


def test_given_the_old_audits_blind_spots_then_neither_explains_a_duplicate() -> None:
    # The old audit counted every pid the fleet stopped at the end as killed, and any pail
    # log line as a stall. Here the first worker is only stopped at the end (no kill), and
    # nothing but the records' leases and real kills can explain the overlap: it is caught.
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", 11.5), JOB),
            start_line(7, 200, 10.3, lease("b", 11.8), JOB),
        ],
        kills={},
    )

    assert found.kinds == {"overlap with a live lease": 1}
    assert found.duplicates == {}


def test_given_a_run_that_started_with_its_lease_run_out_then_a_zombie_from_its_start() -> None:
    found = run(
        [
            start_line(7, 100, 10.0, lease("a", None), JOB),  # a claim slowed past the timeout
            start_line(7, 200, 10.5, lease("b", 12.0), JOB),
        ]
    )

    assert found.violations == [] and found.duplicates == {ZOMBIE: 1}
    assert found.started_expired == 1


def test_given_a_line_still_being_written_then_the_reader_leaves_it_for_later(
    tmp_path: Path,
) -> None:
    """The fan-in run reads the record while workers append: half a line is not a line yet."""
    record = tmp_path / "executions.log"
    assert complete_lines(record) == []
    whole = start_line(1, 101, 10.0, lease("a", 20.0), JOB)
    record.write_text(whole + "\n" + whole[:40])
    assert complete_lines(record) == [whole]
    assert len(read_executions(complete_lines(record))) == 1
    with record.open("a") as appending:
        appending.write(whole[40:] + "\n")
    assert complete_lines(record) == [whole, whole]
