"""Job tags: a few short ``key=value`` labels a producer gives a job to find it by.

``enqueue(payload, tags={"customer": "acme", "kind": "export"})``. Tags are
checked here, at the edge, before anything is written; the checked form is
what the job's objects carry (``pail.codec``), what ``done/{id}``'s metadata
spells (``encode_metadata``) and what the search index names its keys after
(``pail.protocol.index``).

Bounds, so that every tag fits a key segment and all of a job's tags fit S3's
2 KB of user metadata beside pail's own:

* at most ``MAX_TAGS`` tags;
* a key is 1 to ``MAX_KEY_LENGTH`` characters of ``A-Z a-z 0-9 _ . -``,
  starting with a letter or digit;
* a value is 1 to ``MAX_VALUE_LENGTH`` printable characters (any script; no
  control characters, no line breaks);
* all the tags, URL-encoded (as the metadata holds them), take at most
  ``MAX_ENCODED_BYTES`` bytes.

Tags read back from the bucket are input like any other bytes: ``read_tags`` keeps
what passes these checks and drops the rest, never raising.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, urlencode

from pail.errors import ConfigurationError

MAX_TAGS = 8
MAX_KEY_LENGTH = 32
MAX_VALUE_LENGTH = 64
MAX_ENCODED_BYTES = 1024

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Tags = dict[str, str]
"""A job's tags, checked, sorted by key."""


def _problem(key: object, value: object) -> str | None:
    if not isinstance(key, str) or not _KEY.match(key) or len(key) > MAX_KEY_LENGTH:
        return (
            f"tag key {key!r} must be 1 to {MAX_KEY_LENGTH} characters of A-Z, a-z, 0-9, "
            "'_', '.' and '-', starting with a letter or digit"
        )
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_VALUE_LENGTH
        or not value.isprintable()
    ):
        return (
            f"tag {key}'s value {value!r} must be 1 to {MAX_VALUE_LENGTH} printable characters "
            "(no control characters or line breaks)"
        )
    return None


def validate(tags: Mapping[str, str] | None) -> Tags:
    """``tags`` checked and sorted by key, or ``ConfigurationError`` saying which bound broke.

    >>> validate({"kind": "export", "customer": "acme"})
    {'customer': 'acme', 'kind': 'export'}
    >>> validate({"customer": ""})
    Traceback (most recent call last):
    ...
    pail.errors.ConfigurationError: tag customer's value '' must be 1 to 64 printable characters (no control characters or line breaks)
    """
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise ConfigurationError(f"tags must be a mapping of str to str, got {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise ConfigurationError(f"a job takes at most {MAX_TAGS} tags, got {len(tags)}")
    for key, value in tags.items():
        problem = _problem(key, value)
        if problem:
            raise ConfigurationError(problem)
    checked = dict(sorted(tags.items()))
    size = len(encode_metadata(checked))
    if size > MAX_ENCODED_BYTES:
        raise ConfigurationError(
            f"tags take {size} bytes URL-encoded; a job's tags may take at most {MAX_ENCODED_BYTES}"
        )
    return checked


def read_tags(value: object) -> Tags:
    """The tags in a decoded JSON value from the bucket; ``{}`` for anything that is not valid tags.

    >>> read_tags({"customer": "acme"}), read_tags({"bad key": "x"}), read_tags("junk")
    ({'customer': 'acme'}, {}, {})
    """
    if not isinstance(value, dict):
        return {}
    try:
        return validate(value)
    except ConfigurationError:
        return {}


def encode_metadata(tags: Tags) -> str:
    """Tags as one ASCII metadata value: URL-encoded ``key=value`` pairs.

    >>> encode_metadata({"customer": "Åsa & co"})
    'customer=%C3%85sa%20%26%20co'
    """
    return urlencode(tags, quote_via=quote, safe="")


def decode_metadata(text: str | None) -> Tags:
    """The tags a metadata value spells; ``{}`` for none or for anything malformed.

    >>> decode_metadata("customer=%C3%85sa%20%26%20co"), decode_metadata("%%%")
    ({'customer': 'Åsa & co'}, {})
    """
    if not text:
        return {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True, errors="strict")
    except (ValueError, UnicodeDecodeError):
        return {}
    if len({key for key, _ in pairs}) != len(pairs):
        return {}
    return read_tags(dict(pairs))


def parse(text: str) -> tuple[str, str]:
    """One ``key=value`` as the CLI takes it, checked; ``ConfigurationError`` otherwise.

    >>> parse("customer=acme")
    ('customer', 'acme')
    """
    key, equals, value = text.partition("=")
    if not equals:
        raise ConfigurationError(f"tag {text!r} must be key=value")
    problem = _problem(key, value)
    if problem:
        raise ConfigurationError(problem)
    return key, value
