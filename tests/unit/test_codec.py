"""The object bodies: versioned, backward compatible with pailq 0.1.1, never ambiguous."""

from __future__ import annotations

import json

import pytest

from pail.codec import (
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    decode_result,
    encode_result,
)
from pail.errors import DecodeError, PayloadError


def test_given_pailq_011_pending_body_when_decoded_then_payload_and_attempts_read() -> None:
    envelope = Envelope.decode(b'{"payload": {"report_id": "q2"}, "attempts": 2}')
    assert (envelope.payload, envelope.attempts, envelope.last_error) == (
        {"report_id": "q2"},
        2,
        None,
    )


def test_given_envelope_when_encoded_then_it_keeps_the_011_fields_and_a_fresh_token() -> None:
    first, second = Envelope(payload={"a": 1}), Envelope(payload={"a": 1})
    body = json.loads(first.encode())
    assert body["payload"] == {"a": 1} and body["attempts"] == 0
    assert first.encode() != second.encode(), "two writes must never have the same bytes"


@pytest.mark.parametrize(
    "body", [b"\x00garbage", b"[1, 2]", b'{"attempts": 1}', b'{"payload": 1, "attempts": -1}']
)
def test_given_body_that_is_not_a_job_when_decoded_then_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        Envelope.decode(body)


def test_given_lease_when_rewritten_then_same_job_with_new_token() -> None:
    lease = LeaseRecord("J", {"n": 1}, attempt=2, owner="w1", lease="L")
    renewed = lease.rewritten(progress={"pct": 40})
    decoded = LeaseRecord.decode(renewed.encode(), "J")
    assert decoded.progress == {"pct": 40} and decoded.attempt == 2 and decoded.lease == "L"
    assert renewed.write != lease.write


def test_given_pailq_011_lease_when_decoded_then_attempt_counts_this_run() -> None:
    assert LeaseRecord.decode(b'{"payload": 1, "attempts": 0}', "J").attempt == 1


def test_given_none_result_when_encoded_then_empty_object_so_null_only_marks_dead() -> None:
    assert encode_result(None) == b"{}"
    assert decode_result(encode_result({"url": "x"})) == {"url": "x"}


def test_given_unserialisable_result_when_encoded_then_payload_error_names_the_cause() -> None:
    with pytest.raises(PayloadError, match="not JSON-serialisable"):
        encode_result({"when": object()})
    with pytest.raises(PayloadError):
        encode_result(float("nan"))


def test_given_exception_when_recorded_then_type_message_and_truncated_traceback() -> None:
    try:
        raise ValueError("x" * 5000)
    except ValueError as exc:
        info = ErrorInfo.from_exception(exc, attempt=3)
    assert info.type == "ValueError" and len(info.message) == 2000 and info.attempt == 3
    assert "ValueError" in info.traceback and len(info.traceback) <= 4100
    letter = DeadLetter("J", {"n": 1}, 4, info)
    assert DeadLetter.decode(letter.encode(), "J").error == info
