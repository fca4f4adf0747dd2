"""Making, replacing, removing and listing schedules, and syncing the ones a deploy declares.

``put`` creates or replaces a definition. A replacement keeps the history
(``last_tick``, ``last_job``) and is written ``If-Match`` the record it read,
so a scheduler's concurrent update is never lost silently: one of the two
writes wins, and ``put`` retries on top of the winner. ``created`` is the
server's time of the read (or the producer's clock for a new schedule): a
replaced schedule's due ticks start after it.

``sync`` makes the bucket hold exactly the schedules a deploy declares (the
CDK app's ``PailQueue.add_schedule``, passed to the reaper function as
configuration): it writes the declared ones that differ and removes the
``deploy`` ones no longer declared. Schedules made at run time (``api``) are
left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pail import jsonsafe
from pail.errors import ConfigurationError, DecodeError, ObjectTooLargeError
from pail.ids import new_token
from pail.keys import Keys
from pail.protocol.schedules.definition import (
    MAX_BYTES,
    SOURCE_DEPLOY,
    Schedule,
    validate_catch_up,
    validate_name,
)
from pail.protocol.schedules.timing import Timing
from pail.protocol.writes import WriteStats, put_conditional
from pail.store.base import Store, StoredObject
from pail.store.listing import pages

log = logging.getLogger("pail")

ROUNDS = 5


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as ``Pail.schedules()`` lists it: its definition, its next tick, its last job."""

    schedule: Schedule
    next_due: datetime

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def last_job(self) -> str | None:
        return self.schedule.last_job

    def to_json(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "name": s.name,
            "cron": s.timing.cron,
            "every": s.timing.every,
            "timezone": s.timing.timezone,
            "catch_up": s.catch_up,
            "source": s.source,
            "payload": s.payload,
            "created": s.created.isoformat(),
            "next_due": self.next_due.isoformat(),
            "last_tick": None if s.last_tick is None else s.last_tick.isoformat(),
            "last_job": s.last_job,
            "paused": s.paused,
        }


def put(
    store: Store,
    keys: Keys,
    schedule: Schedule,
    *,
    stats: WriteStats | None = None,
) -> Schedule:
    """Create ``schedule`` or replace the one of its name; return what was written."""
    key = keys.schedule(validate_name(schedule.name))
    for _ in range(ROUNDS):
        current = store.get(key)
        written = schedule
        if current is not None:
            old = _decoded(current)
            if old is not None and old.same_definition(schedule):
                return old  # unchanged: keep its creation time, so no tick is skipped
            if old is not None:
                written = replace(
                    schedule, last_tick=old.last_tick, last_job=old.last_job, paused=old.paused
                )
        token = new_token()
        won = put_conditional(
            store,
            key,
            written.encode(token),
            token,
            if_none_match=current is None,
            if_match=None if current is None else current.etag,
            stats=stats,
            reason="schedule",
        )
        if won is not None:
            return written
    raise ConfigurationError(f"schedule {schedule.name!r} keeps changing under us; try again")


def set_paused(
    store: Store,
    keys: Keys,
    name: str,
    paused: bool,
    *,
    now: datetime,
    stats: WriteStats | None = None,
) -> Schedule | None:
    """Pause or resume schedule ``name``; what it is now, or None if there is none.

    Resuming moves ``created`` to ``now``: the ticks that fell while it was
    paused are not due (they are not "missed"). Written ``If-Match``, retried
    on top of a concurrent scheduler's write.
    """
    key = keys.schedule(validate_name(name))
    for _ in range(ROUNDS):
        current = store.get(key)
        if current is None:
            return None
        old = _decoded(current)
        if old is None:
            raise ConfigurationError(f"schedule {name!r} is unreadable; remove it and add it again")
        if old.paused == paused:
            return old
        new = replace(old, paused=paused, created=old.created if paused else now)
        token = new_token()
        won = put_conditional(
            store,
            key,
            new.encode(token),
            token,
            if_match=current.etag,
            stats=stats,
            reason="schedule",
        )
        if won is not None:
            return new
    raise ConfigurationError(f"schedule {name!r} keeps changing under us; try again")


def remove(store: Store, keys: Keys, name: str) -> bool:
    """Remove schedule ``name``; False if there was none. Its jobs already enqueued stay."""
    key = keys.schedule(validate_name(name))
    if store.head(key) is None:
        return False
    store.delete(key)
    return True


def read_all(store: Store, keys: Keys) -> tuple[list[ScheduleInfo], datetime | None]:
    """Every readable schedule with its next tick after the server's time, by name; and that time.

    One LIST per 1,000 schedules and one GET per schedule. Unreadable
    definitions are logged and left out.
    """
    prefix = keys.schedules()
    found: list[ScheduleInfo] = []
    now: datetime | None = None
    for page in pages(store, prefix):
        now = now or page.server_time
        for item in page.items:
            name = item.key[len(prefix) :]
            if not name:
                continue
            if item.size > MAX_BYTES:
                log.warning("schedules: %s is %d bytes, not read", item.key, item.size)
                continue
            obj = store.get(item.key)
            schedule = None if obj is None else _decoded(obj)
            if schedule is not None:
                found.append(ScheduleInfo(schedule, schedule.timing.next_after(now)))
    found.sort(key=lambda info: info.name)
    return found, now


@dataclass(frozen=True, slots=True)
class Listed:
    """One object under the schedules prefix, as an operator's page shows it.

    ``info`` is the schedule when the object is one; otherwise ``problem``
    says why not (not a schedule name, too large to read, bytes that do not
    decode), and the object is shown as such: a definition is input.
    """

    key: str
    name: str
    size: int
    info: ScheduleInfo | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ListedPage:
    """One bounded page of ``read_page``: what it listed, and where the next page starts."""

    entries: tuple[Listed, ...]
    more: bool
    """The listing did not reach the end of the prefix."""
    next_after: str | None
    """The name the next page starts after (None on the last page, or where the listing
    is not in key order: a directory bucket)."""
    server_time: datetime | None


def read_page(
    store: Store, keys: Keys, *, after: str | None = None, limit: int = 100
) -> ListedPage:
    """At most ``limit`` objects under the schedules prefix, by name, after the name ``after``.

    One LIST and at most one GET per object listed; an object larger than
    ``MAX_BYTES`` is not read, and any other object that is not a schedule
    is listed with its problem rather than left out (``read_all`` leaves
    them out). It never raises for what an object holds.

    >>> from pail.store import MemoryStore
    >>> store = MemoryStore("jobs")
    >>> _ = store.put("_pail/schedules/junk", b"{not json")
    >>> page = read_page(store, Keys())
    >>> page.entries[0].name, page.entries[0].info, page.entries[0].problem[:38]
    ('junk', None, "schedule definition 'junk' is unreadab")
    """
    prefix = keys.schedules()
    start = None if after is None else prefix + after
    entries: list[Listed] = []
    page = next(pages(store, prefix, max_keys=limit, max_pages=1, start_after=start))
    for item in page.items:
        name = item.key[len(prefix) :]
        if not name and item.size == 0:
            continue  # the console's "folder"
        entries.append(_listed(store, item.key, name, item.size, page.server_time))
    more = page.next_token is not None
    last = page.items[-1].key[len(prefix) :] if page.items else None
    ordered = store.ordered_listing
    return ListedPage(tuple(entries), more, last if more and ordered else None, page.server_time)


def _listed(store: Store, key: str, name: str, size: int, now: datetime) -> Listed:
    try:
        validate_name(name)
    except ConfigurationError:
        return Listed(key, name, size, None, "not a schedule name")
    if size > MAX_BYTES:
        return Listed(key, name, size, None, f"{size:,} bytes, more than {MAX_BYTES:,}: not read")
    try:
        obj = store.get(key)
    except ObjectTooLargeError as exc:
        return Listed(key, name, exc.size, None, f"{exc.size:,} bytes: not read")
    if obj is None:
        return Listed(key, name, size, None, "removed since the listing")
    try:
        schedule = Schedule.decode(obj.body, name)
    except DecodeError as exc:
        return Listed(key, name, len(obj.body), None, str(exc))
    return Listed(key, name, len(obj.body), ScheduleInfo(schedule, schedule.timing.next_after(now)))


def sync(
    store: Store,
    keys: Keys,
    declared: Iterable[Schedule],
    *,
    stats: WriteStats | None = None,
) -> tuple[list[str], list[str]]:
    """Make the bucket hold the ``declared`` (deploy) schedules; return (written, removed) names.

    A declared schedule identical to the stored one is not written (its
    history and creation time stay); a stored ``deploy`` schedule that is no
    longer declared is removed. ``api`` schedules are never touched, but a
    declared one replaces an ``api`` one of the same name.
    """
    existing, now = read_all(store, keys)
    # Made now by the server's clock, the one the ticks are computed on.
    wanted = {s.name: replace(s, source=SOURCE_DEPLOY, created=now or s.created) for s in declared}
    written: list[str] = []
    removed: list[str] = []
    stored = {info.name: info.schedule for info in existing}
    for name, schedule in sorted(wanted.items()):
        old = stored.get(name)
        if old is None or not old.same_definition(schedule):
            put(store, keys, schedule, stats=stats)
            written.append(name)
    for name, old in sorted(stored.items()):
        if old.source == SOURCE_DEPLOY and name not in wanted:
            store.delete(keys.schedule(name))
            removed.append(name)
    return written, removed


def declaration(
    name: str,
    payload: Any,
    *,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    catch_up: int = 1,
) -> dict[str, Any]:
    """A schedule a deploy declares, checked, as the JSON ``declared`` reads back.

    ``PailQueue.add_schedule`` calls it at synth time, so a bad expression
    or name fails ``cdk synth`` with the runtime's own message.

    >>> declaration("nightly", {"r": 1}, cron="@daily")
    {'name': 'nightly', 'payload': {'r': 1}, 'cron': '0 0 * * *', 'every': None, 'timezone': 'UTC', 'catch_up': 1}
    """
    timing = Timing.of(cron=cron, every=every, timezone=timezone)
    jsonsafe.check_value(payload, "payload")
    return {
        "name": validate_name(name),
        "payload": payload,
        "cron": timing.cron,
        "every": timing.every,
        "timezone": timing.timezone,
        "catch_up": validate_catch_up(catch_up),
    }


def declared(text: str, *, now: datetime) -> list[Schedule]:
    """The schedules of a deploy's declaration (``ENV_SCHEDULES``); ``ConfigurationError`` if it is not one."""
    try:
        items = jsonsafe.loads(text.encode(), "the declared schedules")
    except DecodeError as exc:
        raise ConfigurationError(str(exc)) from None
    if not isinstance(items, list):
        raise ConfigurationError("the declared schedules are not a JSON list")
    schedules: list[Schedule] = []
    for item in items:
        if not isinstance(item, dict):
            raise ConfigurationError(f"a declared schedule is not a JSON object: {item!r:.100}")
        checked = declaration(
            item.get("name"),  # type: ignore[arg-type]
            item.get("payload"),
            cron=item.get("cron"),
            every=item.get("every"),
            timezone=item.get("timezone", "UTC"),
            catch_up=item.get("catch_up", 1),
        )
        schedules.append(
            Schedule(
                name=checked["name"],
                payload=checked["payload"],
                timing=Timing.of(
                    cron=checked["cron"], every=checked["every"], timezone=checked["timezone"]
                ),
                created=now,
                catch_up=checked["catch_up"],
                source=SOURCE_DEPLOY,
            )
        )
    names = [s.name for s in schedules]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"the declared schedules repeat a name: {sorted(names)}")
    return schedules


def _decoded(obj: StoredObject) -> Schedule | None:
    name = obj.key.rsplit("/", 1)[-1]
    try:
        return Schedule.decode(obj.body, name)
    except DecodeError as exc:
        log.warning("schedules: %s is unreadable: %s", obj.key, exc)
        return None
