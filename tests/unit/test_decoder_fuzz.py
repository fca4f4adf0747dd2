"""Property-based fuzz of every decoder: for ANY bytes, a value or the documented ``DecodeError``.

Each decoder of a foreign object (``pail.jsonsafe.loads`` and, over it, the
pending entry, the lease, the dead letter, the result and the dedup key
record, and the reaper's cursor) is fed arbitrary bytes, arbitrary JSON (``NaN`` and the infinities,
integers past the digit limit, nesting far past any interpreter's limit,
every field with every wrong type) and mutations of valid objects. No other
exception may escape: one that did would stop a worker loop or the reaper.
The encoders get the mirror property: any Python value is written or
refused with ``PayloadError``, nothing else.

"A value or ``DecodeError``" alone holds for a decoder that refuses
everything, so every decoder must also give back what pail wrote: generated
valid objects (any strict-JSON payload, every field filled) decode to the
value that was encoded. A decoder that always raises, or that returns a
constant, fails that property (shown below for each decoder).

The profile is deterministic (``derandomize``: the same examples every run,
so it cannot flake) and runs 3,300 examples in all; set
``HYPOTHESIS_PROFILE=pail-deep`` for a randomised run of the full 13,000.
Nearly all of a run's time is Hypothesis drawing examples (the decoders take
3% of it), so the count is the cost. With the ``@example``s below, the
smaller default count reaches every line and branch of ``runtime/pail`` that
the full count reaches (compared on 2026-12-03 with ``sys.monitoring`` line
and branch events over this whole file; the examples marked as drawn by the
full count are the few it reached and the default did not), and
``tests.support.hostile``'s catalogue runs every time.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from pail.bounds import MAX_COUNT, MAX_DUE, MAX_RETRY_DELAY
from pail.codec import (
    LEASE_STATES,
    DeadLetter,
    Envelope,
    ErrorInfo,
    LeaseRecord,
    decode_result,
    encode_result,
)
from pail.errors import DecodeError, PayloadError
from pail.jsonsafe import DOCUMENT_DEPTH, MAX_DEPTH, check_value, loads
from pail.keys import ALL_PREFIXES, Keys
from pail.protocol import delay
from pail.protocol.dedup import KeyRecord
from pail.protocol.dedup import decode_record as decode_dedup_record
from pail.protocol.reap_cursor import Position, _Cursor
from pail.protocol.reap_cursor import decode as decode_reap_cursor
from tests.support.hostile import ALL_BODIES

settings.register_profile(
    "pail",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("pail-deep", database=None, deadline=None, max_examples=20_000)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "pail")
settings.load_profile(PROFILE)


def _examples(default: int, deep: int) -> int:
    """A property's example count: ``default`` in the everyday profile, ``deep`` in ``pail-deep``."""
    return deep if PROFILE == "pail-deep" else default


JOB_ID = "01J0000000000000000000000A"

DECODERS: dict[str, Callable[[bytes], Any]] = {
    "json": lambda body: loads(body, "object"),
    "pending": Envelope.decode,
    "lease": lambda body: LeaseRecord.decode(body, JOB_ID),
    "letter": lambda body: DeadLetter.decode(body, JOB_ID),
    "result": decode_result,
    "dedup": decode_dedup_record,
    "reap-cursor": lambda body: decode_reap_cursor(body, Keys()),
}

# Every field name any pail object has, so that generated objects hit the
# typed reads with wrong types, not just unknown keys.
FIELDS = (
    "payload",
    "attempts",
    "v",
    "enqueued_at",
    "last_error",
    "redriven",
    "w",
    "cancelled",
    "id",
    "owner",
    "lease",
    "state",
    "error",
    "progress",
    "reaped",
    "retry_after",
    "raw",
    "key",
    "envelope",
    "waiting",
    "on_failure",
    "after",
    "then",
    "due",
    "type",
    "message",
    "traceback",
    "attempt",
)


def _decodes_totally(body: bytes, decoders: dict[str, Callable[[bytes], Any]] = DECODERS) -> None:
    for name, decoder in decoders.items():
        try:
            decoder(body)
        except DecodeError:
            pass
        except Exception as exc:
            raise AssertionError(f"{name} decoder raised {type(exc).__name__}: {exc}") from exc


def _nested(levels: int, leaf: bytes = b"0") -> bytes:
    return b"[" * levels + leaf + b"]" * levels


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["running", "retrying", "dying", "2026-01-01T00:00:00+00:00", JOB_ID]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)), children, max_size=5
        ),
    ),
    max_leaves=12,
)
field_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(FIELDS), scalars, max_size=4),
)
objects = st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=10)
"""JSON objects made of pail's own field names, each holding a value of any type."""


def _dump(value: Any) -> bytes:
    # Python's json default: NaN and Infinity as bare words, as pailq 0.1.1 writes.
    return json.dumps(value, allow_nan=True).encode()


@settings(max_examples=_examples(1_000, 4_000))
@given(st.binary(max_size=400))
@example(b"")
@example(b"\xef\xbb\xbf{}")
@example(_nested(50_000))
@example(_nested(DOCUMENT_DEPTH) + b"]")
@example(b'{"payload": 1' + b"0" * 5000 + b', "attempts": 0}')
@example(b'"\\ud800"')
@example(b"\x00\x00\x00[")
def test_given_any_bytes_when_decoded_then_a_value_or_decode_error(body: bytes) -> None:
    _decodes_totally(body)


def test_given_every_catalogued_hostile_body_when_decoded_then_a_value_or_decode_error() -> None:
    for body in ALL_BODIES:
        _decodes_totally(body)


@settings(max_examples=_examples(500, 2_000))
@given(json_values)
def test_given_any_json_value_when_decoded_then_a_value_or_decode_error(value: Any) -> None:
    _decodes_totally(_dump(value))


@settings(max_examples=_examples(600, 2_500))
@given(objects, st.integers(min_value=0, max_value=3))
# Fields of the right type that the full count draws and the default may not: an empty
# error type, a lease as pailq 0.1.1 wrote it (no "lease"), retry delays that are no number.
@example({"payload": 1, "attempts": 0, "last_error": {"type": "", "attempt": 0}}, 0)
@example({"id": JOB_ID, "payload": 1, "attempts": 1, "owner": "", "state": "running"}, 0)
@example({"id": JOB_ID, "payload": 1, "lease": "t", "state": "retrying", "retry_after": True}, 0)
@example({"id": JOB_ID, "payload": 1, "lease": "t", "state": "retrying", "retry_after": "1"}, 0)
def test_given_pail_fields_of_any_type_when_decoded_then_a_value_or_decode_error(
    fields: dict[str, Any], wrap: int
) -> None:
    value: Any = fields
    if wrap == 1:
        value = {"id": JOB_ID, "envelope": fields, "due": fields.get("due")}
    elif wrap == 2:
        value = {**fields, "last_error": fields, "error": fields}
    _decodes_totally(_dump(value))


@settings(max_examples=_examples(150, 500))
@given(
    st.one_of(st.integers(0, 2 * DOCUMENT_DEPTH), st.integers(0, 60_000)),
    st.sampled_from([b"[", b'{"a":']),
)
def test_given_any_nesting_depth_when_decoded_then_a_value_or_decode_error(
    levels: int, opener: bytes
) -> None:
    closer = b"]" if opener == b"[" else b"}"
    body = b'{"payload": ' + opener * levels + b"0" + closer * levels + b', "attempts": 0}'
    _decodes_totally(body)
    if levels + 1 > DOCUMENT_DEPTH:
        try:
            Envelope.decode(body)
        except DecodeError as exc:
            assert "levels deep" in str(exc)
        else:
            raise AssertionError(f"a {levels}-deep payload decoded")


strict_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**300), max_value=10**300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20),
)
strict_json = st.recursive(
    strict_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=12,
)
"""What pail writes: JSON with no NaN or infinities, no lone surrogates, shallow."""
counts = st.integers(min_value=0, max_value=MAX_COUNT)
texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
tokens = st.text(alphabet="0123456789abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=26)
times = st.datetimes(timezones=st.just(UTC)).map(lambda when: when.isoformat())
errors = st.one_of(st.none(), st.builds(ErrorInfo, texts.filter(bool), texts, texts, counts))
envelopes = st.builds(
    Envelope,
    payload=strict_json,
    attempts=counts,
    enqueued_at=st.one_of(st.none(), times),
    last_error=errors,
    redriven=counts,
    write=tokens,
    cancelled=st.booleans(),
)
leases = st.builds(
    LeaseRecord,
    job_id=st.just(JOB_ID),
    payload=strict_json,
    attempt=counts,
    owner=texts.filter(bool),
    lease=tokens,
    enqueued_at=st.one_of(st.none(), times),
    state=st.sampled_from(sorted(LEASE_STATES)),
    error=errors,
    progress=strict_json,
    reaped=st.booleans(),
    redriven=counts,
    write=tokens,
    retry_after=st.floats(min_value=0, max_value=MAX_RETRY_DELAY),
    uncounted=st.booleans(),
    raw=st.one_of(st.none(), texts),
)
letters = st.builds(
    DeadLetter,
    job_id=st.just(JOB_ID),
    payload=strict_json,
    attempts=counts,
    error=errors,
    enqueued_at=st.one_of(st.none(), times),
    raw=st.one_of(st.none(), texts),
    redriven=counts,
    write=tokens,
)
dedup_records = st.tuples(
    st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=26, max_size=26),
    st.builds(Envelope, payload=strict_json, enqueued_at=times),
    st.one_of(
        st.none(), st.datetimes(max_value=MAX_DUE.replace(tzinfo=None), timezones=st.just(UTC))
    ),
)
waiting_dedup_records = st.tuples(  # enqueue(key=..., after=[...]): no due time, edges
    st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=26, max_size=26),
    st.builds(
        Envelope,
        payload=strict_json,
        enqueued_at=times,
        after=st.just(("01J0000000000000000000000B",)),
        then=st.sampled_from(((), ("01J0000000000000000000000C",))),
    ),
    st.none(),
)
cursors = st.one_of(
    st.builds(Position, after=texts.map(lambda rest: "run/" + rest)),
    st.builds(Position, token=texts.filter(bool)),
)


def _dedup_body(record: tuple[str, Envelope, datetime | None]) -> bytes:
    job_id, envelope, due = record  # as protocol.dedup.enqueue_keyed writes it
    place = "waiting" if envelope.after else "envelope"
    fields: dict[str, Any] = {"id": job_id, "key": "k", place: json.loads(envelope.encode())}
    if envelope.after:
        fields["on_failure"] = "cancel"
    if due is not None:
        fields["due"] = due.isoformat()
    return json.dumps({**fields, "w": "t"}).encode()


VALID: dict[str, st.SearchStrategy[tuple[str, bytes, Any]]] = {
    "json": strict_json.map(lambda value: ("json", _dump({"v": value}), {"v": value})),
    "pending": envelopes.map(lambda envelope: ("pending", envelope.encode(), envelope)),
    "lease": leases.map(lambda lease: ("lease", lease.encode(), lease)),
    "letter": letters.map(lambda letter: ("letter", letter.encode(), letter)),
    "result": strict_json.map(
        lambda value: ("result", encode_result(value), {} if value is None else value)
    ),
    "dedup": st.one_of(dedup_records, waiting_dedup_records).map(
        lambda record: ("dedup", _dedup_body(record), (record[0], record[1].payload, record[2]))
    ),
    "reap-cursor": cursors.map(
        lambda position: ("reap-cursor", _Cursor(position).encode(), position)
    ),
}
valid_cases = st.one_of(*VALID.values())
"""(decoder name, bytes pail writes, the value they must decode to): one strategy per decoder."""


def _decodes_back(
    decoders: dict[str, Callable[[bytes], Any]], case: tuple[str, bytes, Any]
) -> None:
    name, body, expected = case
    try:
        decoded = decoders[name](body)
    except DecodeError as exc:
        raise AssertionError(f"{name} decoder refused what pail wrote: {exc}") from exc
    if name == "dedup" and isinstance(decoded, KeyRecord):
        # The envelope comes back stripped to what a repair writes.
        decoded = (decoded.job_id, decoded.envelope.payload, decoded.due)
    assert decoded == expected, f"{name} decoder gave {decoded!r}, not {expected!r}"


FULL_LEASE = LeaseRecord(
    JOB_ID,
    {"n": 1},
    2,
    "host:1",
    "t",
    enqueued_at="2026-01-01T00:00:00+00:00",
    error=ErrorInfo("E", "m", "tb", 1),
    progress={"done": 1},
)
"""A lease with its optional fields set: the full count draws one, the default may not."""


@settings(max_examples=_examples(250, 1_000))
@given(valid_cases)
@example(("lease", FULL_LEASE.encode(), FULL_LEASE))
def test_given_what_pail_writes_when_decoded_then_the_value_written(
    case: tuple[str, bytes, Any],
) -> None:
    _decodes_back(DECODERS, case)


def _refuses(body: bytes) -> Any:
    raise DecodeError("refused")


@pytest.mark.parametrize("name", sorted(DECODERS))
@pytest.mark.parametrize("broken", [_refuses, lambda body: None], ids=["raises", "constant"])
def test_given_a_decoder_that_refuses_or_ignores_its_input_then_the_valid_input_property_fails(
    name: str, broken: Callable[[bytes], Any]
) -> None:
    decoders = {**DECODERS, name: broken}
    if broken is _refuses:
        _decodes_totally(b"{}", decoders)  # the old weakness: totality alone lets it pass

    @settings(max_examples=50, phases=[Phase.generate])  # found, not shrunk: it fails at once
    @given(VALID[name])
    def valid_inputs_decode(case: tuple[str, bytes, Any]) -> None:
        _decodes_back(decoders, case)

    with pytest.raises(AssertionError, match=f"{name} decoder"):
        valid_inputs_decode()


def _valid_bodies() -> list[bytes]:
    error = ErrorInfo("E", "m", "tb", 1)
    return [
        Envelope(
            {"n": 1}, attempts=2, enqueued_at="2026-01-01T00:00:00+00:00", last_error=error
        ).encode(),
        LeaseRecord(JOB_ID, {"n": 1}, 2, "host:1", "t", progress={"done": 1}, error=error).encode(),
        DeadLetter(JOB_ID, {"n": 1}, 3, error, raw="x").encode(),
        encode_result({"n": [1, 2]}),
        b'{"payload": {"x": NaN}, "attempts": 0}',
    ]


@settings(max_examples=_examples(500, 2_000))
@given(
    st.sampled_from(_valid_bodies()),
    st.lists(
        st.tuples(
            st.sampled_from(["flip", "cut", "insert"]), st.integers(0, 400), st.binary(max_size=3)
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_given_a_valid_object_mutated_when_decoded_then_a_value_or_decode_error(
    body: bytes, mutations: list[tuple[str, int, bytes]]
) -> None:
    mutated = bytearray(body)
    for kind, at, chunk in mutations:
        at = at % (len(mutated) + 1)
        if kind == "flip" and at < len(mutated):
            mutated[at] ^= 0xFF
        elif kind == "cut":
            del mutated[at:]
        else:
            mutated[at:at] = chunk
    _decodes_totally(bytes(mutated))


@pytest.mark.parametrize("body", _valid_bodies())
def test_given_the_unmutated_objects_when_decoded_then_each_decodes(body: bytes) -> None:
    decoded = [name for name, decoder in DECODERS.items() if _decodes(decoder, body)]
    # The mutation property starts from these: each must be readable by at least one decoder.
    assert decoded, f"no decoder reads {body[:60]!r}"


def _decodes(decoder: Callable[[bytes], Any], body: bytes) -> bool:
    try:
        decoder(body)
    except DecodeError:
        return False
    return True


@settings(max_examples=_examples(150, 500))
@given(st.text(max_size=80), st.sampled_from(["", "reports"]))
def test_given_any_key_when_parsed_then_an_id_or_none(rest: str, namespace: str) -> None:
    keys = Keys(namespace)
    for prefix in ALL_PREFIXES:
        job_id = keys.entry_id(keys.prefix(prefix) + rest, prefix)
        assert job_id is None or (job_id == rest and "/" not in job_id and job_id)
    parsed = delay.parse(keys, keys.prefix("queue/") + rest)
    assert parsed is None or (0 <= parsed[0] < 10**13 and "/" not in parsed[1])


odd_values = st.one_of(
    json_values,
    st.builds(object),
    st.sets(st.integers(), max_size=3),
    st.integers(min_value=0, max_value=3000).map(lambda n: _deep_list(n)),
    st.dictionaries(st.tuples(st.integers()), st.integers(), max_size=2),
)


def _deep_list(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


@settings(max_examples=_examples(150, 500))
@given(odd_values)
@example({(1,): 1})  # a key JSON cannot write, found in a dictionary's keys
@example({"a": [math.nan, 1.5]})  # below a dictionary and a list, a finite float walked first
@example([2**15_000, 1, True, None, "s"])  # an integer past the digit limit, found last
def test_given_any_python_value_when_checked_for_writing_then_bytes_or_payload_error(
    value: Any,
) -> None:
    try:
        encoded = check_value(value, "payload")
    except PayloadError as exc:
        assert str(exc).startswith("payload")
        return
    decoded = loads(encoded, "payload")  # what pail writes, it reads back
    assert not _has_non_finite(decoded)
    assert encoded.count(b"[") + encoded.count(b"{") >= 0 and _depth(decoded) <= MAX_DEPTH


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend(
                (child, depth) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest
