"""Job ids: every id the API accepts is one the protocol can hold (issue 23, items 7 and 8).

An id that starts with the delayed entry's mark (``!``) was read as another
job's entry, or quarantined unrun; a lone surrogate raised a bare
``UnicodeEncodeError``. Both are refused at the edge now, before any request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from pail import ConfigurationError, JobState, Pail
from pail.errors import JobNotFoundError
from tests.reliability.conftest import Foreign
from tests.support.command import Invoke

RESERVED = ["!x", "!0000000000000-x", "~x", " x", "\tx", "\x00x"]
SURROGATES = ["\ud800", "job-\udcff"]


def _objects(pail: Pail) -> list[str]:
    return sorted(info.key for info in pail.store.list("", max_keys=1000).items)


def test_given_id_that_spells_a_done_jobs_priority_entry_when_enqueued_many_then_refused_and_nothing_written(
    pail: Pail,
) -> None:
    done_id = pail.enqueue({"n": 1})
    assert pail.work_once(lambda payload: "first") is True
    pail.flush()
    before = _objects(pail)

    with pytest.raises(ConfigurationError, match="reserves"):
        pail.enqueue_many([{"n": 2}], ids=["!0000000000000-" + done_id])

    assert _objects(pail) == before
    assert pail.result(done_id) == "first"


@pytest.mark.parametrize("bad", RESERVED + SURROGATES)
def test_given_reserved_or_unencodable_id_when_enqueued_many_then_configuration_error(
    pail: Pail, bad: str
) -> None:
    with pytest.raises(ConfigurationError, match="invalid job id"):
        pail.enqueue_many([{"n": 1}, {"n": 2}], ids=["fine", bad])

    assert pail.stats().pending == 0  # the good one was not written either


@pytest.mark.parametrize("bad", RESERVED + SURROGATES)
def test_given_reserved_or_unencodable_id_when_cancelled_or_redriven_then_configuration_error(
    pail: Pail, bad: str
) -> None:
    for call in (pail.cancel, pail.redrive):
        with pytest.raises(ConfigurationError, match="invalid job id"):
            call(bad)


READS: list[Callable[[Pail, str], Any]] = [
    Pail.status,
    Pail.result,
    Pail.delete_dead_letter,
    Pail.result_url,
    Pail.status_urls,
]


@pytest.mark.parametrize("bad", SURROGATES)
@pytest.mark.parametrize("read", READS, ids=lambda f: f.__name__)
def test_given_lone_surrogate_when_any_call_takes_it_then_configuration_error(
    pail: Pail, bad: str, read: Callable[[Pail, str], Any]
) -> None:
    with pytest.raises(ConfigurationError, match="not valid UTF-8"):
        read(pail, bad)


def test_given_foreign_bang_entry_when_quarantined_then_its_letter_can_be_read_and_deleted(
    pail: Pail, foreign: Foreign
) -> None:
    # Reads of what is in the bucket still name the foreign key's id: the
    # quarantine's letter must stay readable and removable.
    foreign(pail.keys.queue("!x"), b'{"payload": 1, "attempts": 0}')
    ran: list[Any] = []
    pail.work_once(ran.append)  # the claim quarantines it on its way
    pail.flush()
    assert ran == []
    status = pail.status("!x")
    assert status is not None and status.state is JobState.FAILED
    assert [letter.job_id for letter in pail.dead_letters()] == ["!x"]

    assert pail.delete_dead_letter("!x") is True
    assert pail.dead_letters() == []


def test_given_foreign_letter_under_a_priority_entrys_id_when_redriving_all_then_passed_by(
    pail: Pail, foreign: Foreign
) -> None:
    # A dead letter whose id spells job X's high-priority entry (another
    # writer's, or a pailq 0.1.1 worker that ran a delayed entry): sending it
    # back would write queue/!0000000000000-X, which is X's entry, not its own.
    ended = pail.enqueue({"n": 1})
    assert pail.work_once(lambda payload: "first") is True
    pail.flush()
    bad = "!0000000000000-" + ended
    letter = {"v": 1, "id": bad, "payload": {"n": 2}, "attempts": 1, "error": {"type": "E"}}
    foreign(pail.keys.dlq(bad), json.dumps(letter).encode())
    before = _objects(pail)

    assert pail.redrive(all=True) == []

    assert _objects(pail) == before
    with pytest.raises(ConfigurationError):
        pail.redrive(bad)
    with pytest.raises(JobNotFoundError):
        pail.redrive("no-such-job")  # an id the protocol can hold is looked up as before


def test_given_invalid_utf8_id_when_pail_status_then_usage_error_exit_2(
    invoke: Invoke, bucket: str
) -> None:
    # What a shell's $'\xff' becomes in Python's argv: a lone surrogate.
    for command in ("status", "result", "cancel"):
        result = invoke(command, bucket, "\udcff")
        assert result.exit_code == 2, (command, result.output)
        assert "invalid job id" in result.stderr
        assert "UnicodeEncodeError" not in result.stderr

    refused = invoke("cancel", bucket, "!0000000000000-x")
    assert refused.exit_code == 2
    assert "reserves" in refused.stderr
