"""The index's objects: one empty object per tag of a job, named by the tag and the job id."""

from __future__ import annotations

import logging
from urllib.parse import quote, unquote

from pail.errors import AccessDeniedError
from pail.keys import INDEX, MAX_ID_LENGTH, Keys
from pail.store.base import Store
from pail.tags import Tags, read_tags

log = logging.getLogger("pail")

TAG = "tag/"
_EMPTY = b""


def tag_prefix(keys: Keys, key: str, value: str) -> str:
    """The prefix every entry of tag ``key=value`` lives under (the value URL-encoded, '/' too).

    >>> tag_prefix(Keys("reports"), "customer", "acme/eu")
    'reports/_pail/index/tag/customer=acme%2Feu/'
    """
    return f"{keys.root}{INDEX}{TAG}{key}={quote(value, safe='')}/"


def entry_key(keys: Keys, key: str, value: str, job_id: str) -> str:
    """The entry saying that ``job_id`` carries ``key=value``."""
    return f"{tag_prefix(keys, key, value)}{job_id}"


def write(store: Store, keys: Keys, job_id: str, tags: Tags) -> int:
    """Write one entry per tag of ``job_id`` (none for an untagged job); the PUTs made.

    Plain PUTs: an entry has no state to race for, and writing it twice (a
    resent enqueue) leaves the same empty object. They go before the job's
    entry, so a job that exists is always found by its tags; a producer
    that dies between the two leaves entries of a job that never was, which
    readers skip and ``forget``.
    """
    for key, value in tags.items():
        store.put(entry_key(keys, key, value, job_id), _EMPTY, content_type="application/x-empty")
    return len(tags)


def forget(store: Store, key: str) -> None:
    """Delete an entry whose job is gone (its result expired, or it never was).

    A reader not allowed to delete (``grant_read_status`` without ``grant_search``)
    leaves it: the lifecycle rule on the index expires it anyway.
    """
    try:
        store.delete(key)
    except AccessDeniedError:
        log.info("index entry %s names no job; not allowed to delete it", key)


def parse_entry(keys: Keys, key: str) -> tuple[str, str, str] | None:
    """``(tag key, tag value, job id)`` of an index entry, or None for any key that is not one.

    >>> parse_entry(Keys(), "_pail/index/tag/customer=acme%2Feu/01J0000000000000000000000A")
    ('customer', 'acme/eu', '01J0000000000000000000000A')
    >>> parse_entry(Keys(), "_pail/index/tag/customer=acme/"), parse_entry(Keys(), "_pail/index/x")
    (None, None)
    """
    root = f"{keys.root}{INDEX}{TAG}"
    if not key.startswith(root):
        return None
    tag, slash, job_id = key[len(root) :].partition("/")
    if not slash or not job_id or "/" in job_id or len(job_id) > MAX_ID_LENGTH:
        return None
    name, equals, encoded = tag.partition("=")
    try:
        value = unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        return None
    checked = read_tags({name: value}) if equals else {}
    if not checked:
        return None
    return name, value, job_id
