"""The queue's limits: one JSON object, ``_pail/limits``, read by every claimer.

The limits live in the bucket, so a worker started with no setting honours
them. A claimer reads the object at a refill of its page that found
candidates, at most once per ``REFRESH`` seconds (the pause marker's rhythm:
no read per claim), so a change reaches every worker within ``REFRESH``
seconds plus the life of its page (at most a visibility timeout). A claimer
that knows of no limit at all reads every ``ABSENT_REFRESH`` (30 s)
instead: a queue without limits pays one 404 per claimer per 30 s, and a
first limit reaches every worker within that (``limits.gate``).

The body (``v`` 1)::

    {"v": 1, "concurrency": 5, "group_concurrency": 2, "groups": {"tenant-42": 10}}

``concurrency``: at most this many jobs of the queue run at once;
``group_concurrency``: at most this many of any one group; ``groups``: a
group's own limit instead. Any of them may be absent (no such limit).
Other keys (``rate``: the rate limits' section) are kept as they are.

Foreign bytes (not JSON, wrong types, a number out of range) are input, never
an exception: the decoder is total. An object that is there but cannot be
read limits the queue to **one job at a time** (``FOREIGN_CONCURRENCY``) and
says why in ``Limits.reason``: an object there means someone meant a limit,
and one job at a time is below any limit they can have meant, yet lets the
queue drain. A fixed ``set_limit`` rewrites it whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pail.errors import ConditionFailedError, ConfigurationError, DecodeError
from pail.ids import new_token
from pail.jsonsafe import dumps, loads
from pail.keys import Keys
from pail.protocol.limits import groups as group_names
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store

log = logging.getLogger("pail")

VERSION = 1
MAX_CONCURRENCY = 1000
"""The largest concurrency limit: a slot is one object, and a full claimer lists them."""
MAX_GROUP_OVERRIDES = 1000
FOREIGN_CONCURRENCY = 1
"""The queue-wide limit while the limits object holds bytes pail cannot read."""
UPDATE_TRIES = 10


@dataclass(frozen=True, slots=True)
class Limits:
    """A queue's concurrency limits (None: no such limit)."""

    concurrency: int | None = None
    """At most this many jobs of the queue run at once."""
    group_concurrency: int | None = None
    """At most this many jobs of any one group run at once (unless ``groups`` says otherwise)."""
    groups: Mapping[str, int] = field(default_factory=dict)
    """A group's own limit, instead of ``group_concurrency``."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys of the object this module does not read (the rate limits' ``rate``), kept on rewrite."""
    reason: str | None = None
    """Why the object could not be read (then ``concurrency`` is ``FOREIGN_CONCURRENCY``)."""

    @property
    def concurrent(self) -> bool:
        """True if a claim must hold a slot for some job (a concurrency limit is set)."""
        return (
            self.concurrency is not None or self.group_concurrency is not None or bool(self.groups)
        )

    def group_limit(self, group: str | None) -> int | None:
        """The limit of ``group`` (None: unlimited; an ungrouped job has none).

        >>> Limits(group_concurrency=2, groups={"big": 5}).group_limit("big")
        5
        """
        if group is None:
            return None
        return self.groups.get(group, self.group_concurrency)

    def encode(self, token: str) -> bytes:
        """The object's body, with ``token`` as its write token (``w``)."""
        data: dict[str, Any] = {**self.extra, "v": VERSION, "w": token}
        if self.concurrency is not None:
            data["concurrency"] = self.concurrency
        if self.group_concurrency is not None:
            data["group_concurrency"] = self.group_concurrency
        if self.groups:
            data["groups"] = dict(sorted(self.groups.items()))
        return dumps(data, "limits")


NONE = Limits()


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CONCURRENCY:
        raise DecodeError(f"{what} must be an integer from 0 to {MAX_CONCURRENCY}, not {value!r}")
    return value


def decode(body: bytes) -> Limits:
    """The limits in ``body``; never raises (see the module docstring for foreign bytes)."""
    try:
        data = loads(body, "limits")
        if not isinstance(data, dict):
            raise DecodeError(f"limits must be a JSON object, not {type(data).__name__}")
        if data.get("v") != VERSION:
            raise DecodeError(f"unknown limits version {data.get('v')!r}")
        concurrency = data.get("concurrency")
        group_concurrency = data.get("group_concurrency")
        overrides = data.get("groups", {})
        if not isinstance(overrides, dict) or len(overrides) > MAX_GROUP_OVERRIDES:
            raise DecodeError("groups must be an object of at most 1000 group limits")
        groups: dict[str, int] = {}
        for name, value in overrides.items():
            if not group_names.valid(name):
                raise DecodeError(f"{name!r} is not a group name")
            groups[name] = _count(value, f"the limit of group {name!r}")
        known = {"v", "w", "concurrency", "group_concurrency", "groups"}
        return Limits(
            concurrency=None if concurrency is None else _count(concurrency, "concurrency"),
            group_concurrency=None
            if group_concurrency is None
            else _count(group_concurrency, "group_concurrency"),
            groups=groups,
            extra={key: value for key, value in data.items() if key not in known},
        )
    except DecodeError as exc:
        return Limits(concurrency=FOREIGN_CONCURRENCY, reason=str(exc))


def read(store: Store, keys: Keys) -> Limits:
    """The queue's limits (one GET); ``NONE`` when the queue has none."""
    found = store.get(keys.limits())
    if found is None:
        return NONE
    limits = decode(found.body)
    if limits.reason is not None:
        log.warning(
            "the limits object %s is not one pail can read (%s): running at most %d job at a time",
            keys.limits(),
            limits.reason,
            FOREIGN_CONCURRENCY,
        )
    return limits


def _checked(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CONCURRENCY:
        raise ConfigurationError(f"{what} must be an integer from 0 to {MAX_CONCURRENCY} or None")
    return value


def set_limit(
    store: Store,
    keys: Keys,
    concurrency: int | None,
    *,
    group: str | None = None,
    stats: WriteStats | None = None,
) -> Limits:
    """Set (or with None remove) one concurrency limit; the limits now in force.

    ``group=None``: the queue-wide limit; ``group="*"`` (``groups.DEFAULT``):
    the limit of every group without its own; ``group="tenant-42"``: that
    group's own. A read, then a write conditional on what was read
    (``If-Match``, or ``If-None-Match`` for a first limit), retried when
    another writer changed it meanwhile: two operators setting different
    limits at once both land. Unreadable bytes are replaced.

    >>> from pail.store.memory import MemoryStore
    >>> store, keys = MemoryStore(), Keys()
    >>> set_limit(store, keys, 5).concurrency, set_limit(store, keys, 2, group="*").concurrency
    (5, 5)
    """
    value = _checked(concurrency, "concurrency")
    if group is not None and group != group_names.DEFAULT:
        group_names.validate(group)

    def change(current: Limits) -> Limits:
        if group is None:
            return replace(current, concurrency=value)
        if group == group_names.DEFAULT:
            return replace(current, group_concurrency=value)
        overrides = {k: v for k, v in current.groups.items() if k != group}
        if value is not None:
            overrides[group] = value
        if len(overrides) > MAX_GROUP_OVERRIDES:
            raise ConfigurationError(f"at most {MAX_GROUP_OVERRIDES} groups with own limits")
        return replace(current, groups=overrides)

    updated = update(store, keys, change, stats=stats)
    assert updated is not None  # change always answers limits to write
    return updated


def update(
    store: Store,
    keys: Keys,
    change: Callable[[Limits], Limits | None],
    *,
    stats: WriteStats | None = None,
) -> Limits | None:
    """Write ``change(current)`` to the limits object, conditional on the ``current`` read.

    The one read-modify-write of ``_pail/limits`` (``set_limit``, ``rate.set_rate``,
    ``declared.sync``): GET, then PUT ``If-Match`` what was read (``If-None-Match``
    when there was none), retried from the read when another writer changed it
    meanwhile. ``current`` is ``NONE`` when the object is missing or its bytes
    are unreadable (they are replaced). ``change`` answers None to write
    nothing: ``update`` then answers None too.
    """
    for _ in range(UPDATE_TRIES):
        found = store.get(keys.limits())
        current = NONE if found is None else decode(found.body)
        if current.reason is not None:
            current = NONE
        updated = change(current)
        if updated is None:
            return None
        token = new_token()
        written = put_conditional(
            store,
            keys.limits(),
            updated.encode(token),
            token,
            if_none_match=found is None,
            if_match=None if found is None else found.etag,
            stats=stats,
            reason="limits",
        )
        if written is not None:
            return updated
    raise ConditionFailedError(keys.limits())  # changed by others UPDATE_TRIES times in a row


def clear(store: Store, keys: Keys) -> bool:
    """Remove every limit of the queue (one HEAD, one DELETE); False if it had none."""
    if store.head(keys.limits()) is None:
        return False
    store.delete(keys.limits())
    return True
