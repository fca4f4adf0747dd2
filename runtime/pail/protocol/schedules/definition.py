"""A schedule's definition: the record under ``_pail/schedules/{name}``, and its codec.

The record says what to enqueue and when, and what the schedulers last did::

    {"v": 1, "name": "nightly-report", "payload": {...},
     "cron": "0 2 * * *", "timezone": "Europe/Berlin"   (or "every": 3600),
     "catch_up": 1, "created": "2026-...", "source": "api",
     "last_tick": "2026-...", "last_job": "01J...", "w": "<write token>"}

``created`` is when the definition was made or replaced: only ticks after it
are due, so a replaced schedule never runs its old ticks again. ``last_tick``
and ``last_job`` are written by the scheduler after a tick's job exists
(``runner``): they spare the next pass any request for a tick already done,
and tell a person which job the schedule made last. ``source`` is ``api``
for a schedule made at run time, ``deploy`` for one the CDK app declares
(``registry.sync``), so a deploy removes only its own.

Decoding is total: any bytes give a ``Schedule`` or a ``DecodeError`` (a
definition in the bucket is input, whoever wrote it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pail import jsonsafe
from pail.bounds import validate_count
from pail.codec import dumps
from pail.errors import ConfigurationError, DecodeError, PayloadError
from pail.ids import validate_job_id
from pail.protocol.schedules.timing import Timing
from pail.tags import Tags, read_tags

VERSION = 1
SOURCE_API = "api"
SOURCE_DEPLOY = "deploy"
SOURCES = (SOURCE_API, SOURCE_DEPLOY)
MAX_CATCH_UP = 1000
"""The most missed ticks one pass enqueues for a schedule (``catch_up``)."""
MAX_BYTES = 256 * 1024
"""The largest definition pail writes or reads: a scheduler never GETs a bigger object."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def validate_name(name: object) -> str:
    """``name`` if it can name a schedule (1-100 of A-Z a-z 0-9 . _ -, not starting with . _ -).

    >>> validate_name("nightly-report")
    'nightly-report'
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"invalid schedule name {name!r}: use 1-100 characters of A-Z, a-z, 0-9, '.', '_' "
            "and '-', starting with a letter or digit"
        )
    return name


def validate_catch_up(catch_up: object) -> int:
    """How many missed ticks a pass may enqueue: 1 (the latest only) to ``MAX_CATCH_UP``."""
    return validate_count("catch_up", catch_up, minimum=1, maximum=MAX_CATCH_UP)


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule: what to enqueue (``payload``), when (``timing``), and what was done last."""

    name: str
    payload: Any
    timing: Timing
    created: datetime
    catch_up: int = 1
    source: str = SOURCE_API
    last_tick: datetime | None = None
    last_job: str | None = None
    tags: Tags = field(default_factory=dict)
    """The tags of every job a tick enqueues (``pail.tags``)."""
    paused: bool = False
    """While paused no tick is due; resuming moves ``created`` to then, so the pause's ticks never run."""

    @property
    def since(self) -> datetime:
        """Ticks after this are due and not done yet: the last tick done, else the creation."""
        if self.last_tick is None or self.last_tick < self.created:
            return self.created
        return self.last_tick

    def done(self, tick: datetime, job_id: str) -> Schedule:
        """This schedule with ``tick`` recorded as its last one, made by ``job_id``."""
        return replace(self, last_tick=tick, last_job=job_id)

    def same_definition(self, other: Schedule) -> bool:
        """True when ``other`` enqueues the same payload at the same ticks (history aside)."""
        return (
            self.name,
            jsonsafe.dumps(self.payload),
            self.timing,
            self.catch_up,
            self.source,
            self.tags,
        ) == (
            other.name,
            jsonsafe.dumps(other.payload),
            other.timing,
            other.catch_up,
            other.source,
            other.tags,
        )

    def encode(self, token: str) -> bytes:
        """The record's bytes, carrying write token ``token``."""
        data: dict[str, Any] = {"v": VERSION, "name": self.name, "payload": self.payload}
        if self.timing.cron is not None:
            data["cron"] = self.timing.cron
            data["timezone"] = self.timing.timezone
        else:
            data["every"] = self.timing.every
        data["catch_up"] = self.catch_up
        data["created"] = self.created.isoformat()
        data["source"] = self.source
        if self.last_tick is not None:
            data["last_tick"] = self.last_tick.isoformat()
        if self.last_job is not None:
            data["last_job"] = self.last_job
        if self.tags:
            data["tags"] = self.tags
        if self.paused:
            data["paused"] = True
        data["w"] = token
        body = dumps(data)
        if len(body) > MAX_BYTES:
            raise PayloadError(
                f"schedule {self.name!r} is {len(body)} bytes, more than {MAX_BYTES}: keep its "
                "payload small (an id the handler looks up)"
            )
        return body

    @classmethod
    def decode(cls, body: bytes, name: str) -> Schedule:
        """The schedule in ``body`` (the object named ``name``), or ``DecodeError`` for any other bytes."""
        try:
            data = jsonsafe.loads(body, "schedule definition")
            if not isinstance(data, dict):
                raise DecodeError("it is not a JSON object")
            if data.get("v") != VERSION:
                raise DecodeError(f"unknown version {data.get('v')!r}")
            if data.get("name") != name:
                raise DecodeError(f"it names {data.get('name')!r}, not {name!r}")
            payload = data.get("payload")
            jsonsafe.check_value(payload, "payload")
            timing = Timing.of(
                cron=_text(data.get("cron")),
                every=data.get("every"),
                timezone=data.get("timezone", "UTC"),
            )
            source = data.get("source", SOURCE_API)
            if source not in SOURCES:
                raise DecodeError(f"unknown source {source!r}")
            last_job = data.get("last_job")
            return cls(
                name=validate_name(name),
                payload=payload,
                timing=timing,
                created=_time(data.get("created"), "created"),
                catch_up=validate_catch_up(data.get("catch_up", 1)),
                source=source,
                last_tick=None
                if data.get("last_tick") is None
                else _time(data["last_tick"], "last_tick"),
                last_job=None if last_job is None else validate_job_id(last_job),
                tags=read_tags(data.get("tags")),
                paused=_flag(data.get("paused", False)),
            )
        except (DecodeError, ConfigurationError, PayloadError) as exc:
            raise DecodeError(f"schedule definition {name!r} is unreadable: {exc}") from None


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise DecodeError(f"paused is {type(value).__name__}, not true or false")


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise DecodeError(f"cron is {type(value).__name__}, not text")


def _time(value: object, what: str) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise DecodeError(f"{what} is not a time")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise DecodeError(f"{what} is not an ISO 8601 time: {value[:64]!r}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise DecodeError(f"{what} has no time zone")
    return moment
