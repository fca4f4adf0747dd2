"""The object bodies: versioned, backward compatible with pailq 0.1.1, never ambiguous."""

from __future__ import annotations

import hashlib
import json
import math
import traceback

import pytest

from pail.codec import (
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    decode_result,
    encode_result,
    marker_body,
    marker_token,
)
from pail.errors import DecodeError, PayloadError
from pail.ids import new_token
from pail.jsonsafe import check_value


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


@pytest.mark.parametrize(
    ("value", "blamed"),
    [
        ([2**15_000, 1.5], "payload[0] is an integer too large to write as JSON"),
        ([1.5, object(), 2**15_000], "payload[1] is not JSON-serialisable: object"),
        (
            {"x": [1, {"y": object()}], "z": math.inf},
            "payload['x'][1]['y'] is not JSON-serialisable",
        ),
        ([0.25, {"n": -math.inf}], "payload[1]['n'] is -Infinity"),
    ],
)
def test_given_a_payload_json_cannot_write_then_the_error_names_its_first_bad_spot(
    value: object, blamed: str
) -> None:
    with pytest.raises(PayloadError) as caught:
        check_value(value, "payload")

    assert str(caught.value).startswith(blamed)  # never a finite float, never a later spot


def test_given_exception_when_recorded_then_type_message_and_truncated_traceback() -> None:
    try:
        raise ValueError("x" * 5000)
    except ValueError as exc:
        info = ErrorInfo.from_exception(exc, attempt=3)
    assert info.type == "ValueError" and len(info.message) == 2000 and info.attempt == 3
    assert "ValueError" in info.traceback and len(info.traceback) <= 4100
    letter = DeadLetter("J", {"n": 1}, 4, info)
    assert DeadLetter.decode(letter.encode(), "J").error == info


def _lookup(table: dict[str, int], name: str) -> int:
    return table[name] + 1  # the failing line, as a handler's would be


def test_given_a_nested_exception_when_recorded_then_every_frame_and_no_caret_line() -> None:
    try:
        _lookup({"a": 1}, "missing")
    except KeyError as exc:
        info = ErrorInfo.from_exception(exc)
        shown = traceback.format_exception(exc)

    lines = info.traceback.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and lines[-1] == "KeyError: 'missing'"
    assert f'File "{__file__}"' in info.traceback and ", in _lookup" in info.traceback
    assert "return table[name] + 1  # the failing line" in info.traceback
    assert '_lookup({"a": 1}, "missing")' in info.traceback
    # Python's own rendering, minus the markers it computes by parsing each frame's source.
    assert [line for line in "".join(shown).splitlines() if set(line.strip()) - {"^", "~"}] == lines


# --- markers: null to every JSON reader, one write each (issue 18, defect 0) ------------


def test_given_two_markers_when_encoded_then_both_read_null_and_their_bytes_differ() -> None:
    first, second = new_token(), new_token()

    a, b = marker_body(first), marker_body(second)

    assert json.loads(a) is None and json.loads(b) is None  # pailq 0.1.1's result(): no result
    assert a != b
    assert hashlib.md5(a).hexdigest() != hashlib.md5(b).hexdigest()  # S3's ETag: one write each
    assert marker_token(a) == first and marker_token(b) == second


def test_given_a_marker_then_the_operator_listing_does_not_take_it_for_a_result_by_size() -> None:
    """``pail.operate`` calls anything larger than ``MARKER_MAX_BYTES`` a result, unread."""
    from pail.operate.objects import MARKER_MAX_BYTES

    assert len(marker_body(new_token())) <= MARKER_MAX_BYTES
