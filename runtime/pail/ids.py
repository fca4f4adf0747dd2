"""Job ids and write tokens.

Job ids are ULIDs: 26 fixed-width ASCII characters whose byte order is their
creation order, so a standard bucket lists pending jobs oldest first.
Write tokens are random and unique per write; every object pail writes
carries one, which is how a writer recognises its own write after an
ambiguous failure (a lost response, then a retry that comes back 412).
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from pail.errors import ConfigurationError
from pail.keys import MAX_ID_LENGTH

# The first character holds the top 3 bits of a 48-bit time: 0 to 7.
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")


def new_job_id() -> str:
    """A new ULID string, e.g. ``01JD8X3W5K9T2B7Q4R6M0N1P2S``."""
    # Imported here: python-ulid reads its own version through importlib.metadata
    # at import, which scans every installed distribution (~40 ms on a Lambda
    # cold start), and a worker never makes a job id.
    from ulid import ULID

    return str(ULID())


def new_token() -> str:
    """A random token, unique per write (16 hex characters)."""
    return secrets.token_hex(8)


def is_ulid(text: str) -> bool:
    """True for a 26-character Crockford base32 ULID (whose time fits its 48 bits).

    >>> is_ulid("01JD8X3W5K9T2B7Q4R6M0N1P2S"), is_ulid("hello"), is_ulid("Z" * 26)
    (True, False, False)
    """
    return bool(_ULID.match(text))


def ulid_time(job_id: str) -> datetime | None:
    """The creation time encoded in a ULID job id, or None for other ids."""
    if not is_ulid(job_id):
        return None
    from ulid import ULID  # see new_job_id

    try:
        return ULID.from_str(job_id).datetime.astimezone(UTC)
    except ValueError:  # another library's idea of a valid ULID: no time to tell
        return None


RESERVED_FIRST = "!~"
"""Characters a job id may not start with: the key grammar's marks.

``!`` starts a delayed or high-priority entry (``queue/!{due}-{id}``,
``pail.protocol.delay.MARK``), so an id ``!0000000000000-X`` would be read as
job X's entry; ``~`` is kept for the marks that sort after every id (as ``!~``
sorts after every delayed entry). An id may not start with a space or a
control character either: those sort before ``!``, ahead of the high-priority
entries that must come first in a listing.
"""


def validate_job_id(job_id: str, *, stored: bool = False) -> str:
    """``job_id`` if the protocol can hold it as a job's id, else ``ConfigurationError`` (a ``ValueError``).

    An id is 1 to ``MAX_ID_LENGTH`` characters of valid Unicode (a lone
    surrogate, as invalid UTF-8 in a shell argument becomes, cannot be a key),
    with no ``/`` (one key segment), not starting with a reserved mark
    (``RESERVED_FIRST``) or with a character that sorts before ``!``.

    ``stored=True`` is for reads of an object pail found in the bucket (a
    status, a dead letter to show or delete): the marks are let through
    there, because a foreign key such as ``queue/!x`` is quarantined under
    ``dlq/!x`` and must stay readable and removable. Whatever writes a job's
    keys (enqueue, cancel, redrive) takes only ``stored=False`` ids.

    >>> validate_job_id("order-42")
    'order-42'
    >>> validate_job_id("!0000000000000-order-42")
    Traceback (most recent call last):
    ...
    pail.errors.ConfigurationError: invalid job id '!0000000000000-order-42': it starts with '!', which pail reserves for its own keys
    >>> validate_job_id("!x", stored=True)
    '!x'
    """
    if not isinstance(job_id, str) or not job_id or "/" in job_id or len(job_id) > MAX_ID_LENGTH:
        raise ConfigurationError(
            f"invalid job id {job_id!r}: expected one key segment of 1-{MAX_ID_LENGTH} "
            "characters, no '/'"
        )
    try:
        job_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"invalid job id {job_id!r}: not valid UTF-8 text (at character {exc.start})"
        ) from None
    first = job_id[0]
    if not stored and first in RESERVED_FIRST:
        raise ConfigurationError(
            f"invalid job id {job_id!r}: it starts with {first!r}, which pail reserves for its own keys"
        )
    if not stored and first <= " ":
        raise ConfigurationError(
            f"invalid job id {job_id!r}: it starts with a space or control character, which sorts "
            "before pail's own keys (high-priority entries must list first)"
        )
    return job_id
