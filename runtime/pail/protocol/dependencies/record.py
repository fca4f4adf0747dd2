"""The waiting record ``wait/{id}``: a job that runs once all its dependencies succeeded.

Its body::

    {"v", "id", "payload", "after": [ids], "met": [ids], "on_failure",
     "enqueued_at"?, "then"?, "tags"?, "trace"?, "w"}

``after`` names the dependencies, ``met`` those already known to have
succeeded (each added, under ``If-Match``, by whoever saw that success);
``then`` the jobs that wait for this one in turn (a chain). Decoding is
total: any bytes that are not such a record raise ``DecodeError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Self

from pail import jsonsafe
from pail.codec import FORMAT_VERSION, Envelope, dumps
from pail.errors import ConfigurationError, DecodeError
from pail.ids import new_token
from pail.tags import Tags

DEAD_LETTER = "dead-letter"
"""A dependency dead-lettered: the waiting job is dead-lettered too, its error naming it (default)."""
CANCEL = "cancel"
"""A dependency dead-lettered: the waiting job is cancelled."""
WAIT = "wait"
"""A dependency dead-lettered: the job keeps waiting; a redrive of it that succeeds releases it."""
ON_FAILURE: tuple[str, ...] = (DEAD_LETTER, CANCEL, WAIT)


def check_on_failure(value: str) -> str:
    """``value`` if it is one of ``ON_FAILURE``, else ``ConfigurationError``."""
    if value not in ON_FAILURE:
        raise ConfigurationError(
            f"on_failure must be one of {', '.join(ON_FAILURE)}, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """The body of ``wait/{id}``."""

    job_id: str
    payload: Any
    after: tuple[str, ...]
    met: tuple[str, ...] = ()
    on_failure: str = DEAD_LETTER
    enqueued_at: str | None = None
    then: tuple[str, ...] = ()
    tags: Tags = field(default_factory=dict)
    trace: dict[str, str] = field(default_factory=dict)
    write: str = field(default_factory=new_token)
    late: tuple[str, ...] = ()
    """Dependencies that existed before this record and do not name it (``after=`` of a job
    already enqueued): the reaper's pass looks at their outcomes (``repair``)."""

    @property
    def ready(self) -> bool:
        """True once every dependency is known to have succeeded."""
        return set(self.after) <= set(self.met)

    def meeting(self, dependency: str) -> Self:
        """A copy that counts ``dependency`` as succeeded, with a fresh write token."""
        return replace(self, met=(*self.met, dependency), write=new_token())

    def envelope(self) -> Envelope:
        """The pending entry this job becomes once ready: its first attempt, as a plain job's."""
        return Envelope(
            payload=self.payload,
            enqueued_at=self.enqueued_at,
            tags=self.tags,
            trace=self.trace,
            after=self.after,
            then=self.then,
        )

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "id": self.job_id,
            "payload": self.payload,
            "after": list(self.after),
            "met": list(self.met),
            "on_failure": self.on_failure,
        }
        if self.enqueued_at:
            data["enqueued_at"] = self.enqueued_at
        if self.then:
            data["then"] = list(self.then)
        if self.late:
            data["late"] = list(self.late)
        if self.tags:
            data["tags"] = self.tags
        if self.trace:
            data["trace"] = self.trace
        data["w"] = self.write
        return dumps(data)

    @classmethod
    def decode(cls, body: bytes, job_id: str) -> WaitingJob:
        """The waiting record in ``body`` (the object ``wait/{job_id}``), or ``DecodeError``."""
        data = jsonsafe.loads(body, "waiting job")
        if not isinstance(data, dict) or "payload" not in data or "after" not in data:
            raise DecodeError("waiting job is not an object with 'payload' and 'after'")
        # The envelope's reader checks every shared field the same way, so one
        # definition of "a valid field" holds for both records.
        envelope = Envelope.from_json({k: v for k, v in data.items() if k not in _OWN})
        named = data.get("id", job_id)
        if named != job_id:
            raise DecodeError(f"waiting job names {named!r}, not {job_id!r}, the id in its key")
        on_failure = data.get("on_failure", DEAD_LETTER)
        if on_failure not in ON_FAILURE:
            raise DecodeError(f"waiting job has an unknown 'on_failure': {on_failure!r}")
        met = Envelope.from_json({"payload": None, "after": data.get("met", [])}).after
        late = Envelope.from_json({"payload": None, "after": data.get("late", [])}).after
        if not envelope.after:
            raise DecodeError("waiting job waits for nothing ('after' is empty)")
        return cls(
            job_id=job_id,
            payload=envelope.payload,
            after=envelope.after,
            met=met,
            on_failure=on_failure,
            enqueued_at=envelope.enqueued_at,
            then=envelope.then,
            tags=envelope.tags,
            trace=envelope.trace,
            write=envelope.write,
            late=tuple(job for job in late if job in envelope.after),
        )


_OWN = frozenset({"id", "met", "on_failure", "late"})
"""The waiting record's fields that a pending entry does not have."""
