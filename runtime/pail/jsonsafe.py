"""JSON at the edges: what pail writes is strict, what it reads is decoded totally.

Writing, pail accepts only what every reader can decode: RFC 8259 JSON (no
``NaN`` or ``Infinity``: a browser's ``JSON.parse`` refuses them) nested at
most ``MAX_DEPTH`` levels (Python's C decoder gives up near 1,000 levels on
3.12 and 10,000 on 3.13, so a deeper payload written by one worker would
stop another). ``check_value`` refuses anything else with a ``PayloadError``
that says where, before anything is written.

Reading, ``loads`` returns a value or raises ``DecodeError``, whatever the
bytes: empty, not UTF-8, not JSON, too deep, numbers past the integer
conversion limit. It accepts bare ``NaN`` and ``Infinity``: pailq 0.1.1
writes them (Python's json default), and its objects are valid input.

>>> loads(b'{"payload": {"x": NaN}, "attempts": 0}', "pending job")["attempts"]
0
>>> check_value({"x": float("nan")}, "payload")
Traceback (most recent call last):
...
pail.errors.PayloadError: payload['x'] is NaN: JSON has no NaN or Infinity
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pail.errors import DecodeError, PayloadError

MAX_DEPTH = 100
"""The most levels of nested arrays and objects a payload, result or progress value may have."""

DOCUMENT_DEPTH = MAX_DEPTH + 4
"""The most levels a whole object may have: a value plus pail's wrapping (a dedup record is 2)."""

# A JSON string, escapes included: removed before counting brackets, which
# may appear inside strings. Unrolled so that it never backtracks.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth_exceeds(text: str, limit: int) -> bool:
    """True if ``text`` (JSON, or something like it) nests brackets more than ``limit`` deep.

    Peels the innermost pairs off, one level per pass, at C speed: ``limit``
    passes empty any document that nests at most ``limit`` levels.
    """
    if text.count("[") + text.count("{") <= limit:
        return False  # too few brackets to nest that deep: the common case, at C speed
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    brackets = brackets.replace("{", "[").replace("}", "]")
    if "[" * (limit + 1) in brackets:
        return True  # the usual shape of a hostile document, found in one scan
    for _ in range(limit):
        if not brackets:
            return False
        peeled = brackets.replace("[]", "")
        if len(peeled) == len(brackets):
            return False  # unbalanced: not JSON, and the decoder will say so
        brackets = peeled
    return bool(brackets) and "[]" in brackets


def loads(body: bytes, what: str) -> Any:
    """Decode ``body`` as JSON, or raise ``DecodeError`` naming ``what`` it should have been.

    >>> loads(b"", "lease")
    Traceback (most recent call last):
    ...
    pail.errors.DecodeError: lease is empty
    """
    if not isinstance(body, bytes | bytearray):
        raise DecodeError(f"{what} is not bytes but {type(body).__name__}")
    if not body.strip():
        raise DecodeError(f"{what} is empty")
    try:
        text = bytes(body).decode(json.detect_encoding(body), "strict")
    except (UnicodeDecodeError, LookupError) as exc:
        raise DecodeError(f"{what} is not UTF-8 text: {exc}") from None
    if _depth_exceeds(text, DOCUMENT_DEPTH):
        raise DecodeError(f"{what} nests arrays or objects more than {DOCUMENT_DEPTH} levels deep")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, integer digit limit, depth
        raise DecodeError(f"{what} is not JSON: {_short(str(exc))}") from None


def dumps(value: Any, what: str = "value") -> bytes:
    """Compact strict JSON for an object pail writes, or ``PayloadError`` saying what is wrong."""
    text = _encode(value, what)
    if _depth_exceeds(text, DOCUMENT_DEPTH):
        raise PayloadError(f"{what} is nested more than {DOCUMENT_DEPTH} levels deep")
    return text.encode()


def check_value(value: Any, what: str) -> bytes:
    """Refuse ``value`` unless it is strict JSON nested at most ``MAX_DEPTH`` levels; its bytes.

    ``what`` names it in the error (``payload``, ``result``, ``progress``).

    >>> check_value({"report": "q3"}, "payload")
    b'{"report":"q3"}'
    >>> check_value(datetime.now(), "progress")  # doctest: +SKIP
    PayloadError: progress is not JSON-serialisable: datetime
    """
    text = _encode(value, what)
    if _depth_exceeds(text, MAX_DEPTH):
        raise PayloadError(f"{what} is nested more than {MAX_DEPTH} levels deep")
    return text.encode()


def _encode(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError, OverflowError) as exc:
        explained = _explain(value, what)
        raise PayloadError(explained or f"{what} is not JSON-serialisable: {exc}") from None


def _explain(value: Any, what: str) -> str | None:
    """Where in ``value`` JSON fails, for the error message: the first bad spot, walked iteratively."""
    stack: list[tuple[Any, str, int]] = [(value, what, 0)]
    while stack:
        item, path, depth = stack.pop()
        children: list[tuple[Any, str, int]] = []
        if depth > MAX_DEPTH:
            return f"{what} is nested more than {MAX_DEPTH} levels deep (or refers to itself)"
        if isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
            return f"{path} is {shown}: JSON has no NaN or Infinity"
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str | int | float | bool) and key is not None:
                    return f"{path} has a key of type {type(key).__name__}: JSON keys are strings"
                children.append((child, f"{path}[{key!r}]", depth + 1))
        elif isinstance(item, list | tuple):
            children.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > 14_000:  # past Python's 4,300-digit conversion limit
                return f"{path} is an integer too large to write as JSON"
        elif not isinstance(item, str | bool | float) and item is not None:
            return f"{path} is not JSON-serialisable: {type(item).__name__}"
        stack.extend(reversed(children))  # the first child is walked next: the first bad spot
    return None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
