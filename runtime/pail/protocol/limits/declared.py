"""Limits a deploy declares (``PailQueue(concurrency=, rate=, ...)``), written into the bucket.

The construct hands the reaper Lambda the limits object's JSON
(``PAIL_LIMITS``); on its first run after a deploy it makes the bucket's
limits object hold it. The object then carries a digest of the declaration
(``deploy``), so a later run of the same deploy writes nothing, and a limit
set at run time after that deploy (``pail limit``) stays until a deploy
declares different limits. A declaration that is not a limits object is a
``ConfigurationError`` (the deploy's, and only a deploy changes it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from pail.errors import ConfigurationError
from pail.keys import Keys
from pail.protocol.limits import config
from pail.protocol.limits.config import Limits
from pail.protocol.limits.rate import RateLimits
from pail.protocol.writes import WriteStats
from pail.store.base import Store

DEPLOY = "deploy"
"""The limits object's key that names the declaration it was written from (a digest)."""


def digest(text: str) -> str:
    """A short digest of a declaration, whatever its spacing and key order.

    >>> digest('{"concurrency": 3}') == digest('{ "concurrency":3 }')
    True
    """
    canonical = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def declared(text: str) -> Limits:
    """The limits a declaration holds; ``ConfigurationError`` if it is not a limits object.

    >>> declared('{"concurrency": 3, "rate": {"queue": {"max": 10, "per": 1}}}').concurrency
    3
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"declared limits are not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError("declared limits must be a JSON object")
    limits = config.decode(json.dumps({**data, "v": config.VERSION}).encode())
    rates = RateLimits.from_json(limits.extra.get("rate"))
    reason = limits.reason or rates.reason
    if reason is not None:
        raise ConfigurationError(f"declared limits are not ones pail can read: {reason}")
    return replace(limits, extra={**limits.extra, DEPLOY: digest(text)})


def sync(store: Store, keys: Keys, text: str, *, stats: WriteStats | None = None) -> bool:
    """Make the bucket hold the declared limits, unless it already holds this declaration's.

    True if it wrote them. One GET, and a conditional PUT when they differ.
    """
    wanted = declared(text)

    def change(current: Limits) -> Limits | None:
        return None if current.extra.get(DEPLOY) == wanted.extra[DEPLOY] else wanted

    return config.update(store, keys, change, stats=stats) is not None
