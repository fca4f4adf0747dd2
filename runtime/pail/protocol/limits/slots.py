"""Concurrency slots: one object per running job that a limit counts, naming that job's lease.

A limit of ``N`` has ``N`` slot keys, ``_pail/slots/queue/{i}`` (``i`` from
0 to N-1, five digits) for the queue-wide limit and
``_pail/slots/group/{group}/{i}`` for a group's. A claimer holds a slot by
creating its key (``If-None-Match: *``) with a body that names the job and
its lease token (``run/{id}`` and the ``lease`` field the claim is about to
write). The slot is never renewed: it is alive exactly as long as the lease
it names is (``lease_alive``), and the heartbeat that renews the lease
costs nothing more. Every change to a slot is conditional on its ETag:

* **held** by a create-only PUT: one holder per key;
* **proved** by a rewrite ``If-Match`` its ETag, when the claim took so long
  between the slot's write and its lease's that a recovery pass may have
  judged the slot's lease missing (``PROVE_AFTER``);
* **given back** by ``DELETE`` ``If-Match`` its ETag, by the holder when its
  job ends (completed, failed, released, dead-lettered, or its lease lost),
  so a holder that stalled and woke can never free a slot someone else holds;
* **recovered** (``recover``, the reaper's pass and the workers' reclaim
  pass) by ``DELETE`` ``If-Match`` the ETag it read, once the slot is older
  than the visibility timeout (server time) and the lease it names is gone,
  another lease, fenced by a reaper (``reaped``), or decided (not
  ``running``).

``docs/protocol.md`` ("Limits") has the crash analysis of each write.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from pail.codec import RUNNING, LeaseRecord
from pail.errors import DecodeError, PailError
from pail.ids import new_token
from pail.jsonsafe import dumps, loads
from pail.keys import Keys
from pail.protocol.writes import WriteStats, delete_if_unchanged, put_conditional
from pail.store.base import ObjectInfo, Store, StoredObject

log = logging.getLogger("pail")

QUEUE_SCOPE = "queue/"
GROUP_SCOPE = "group/"
CLOCK_RESOLUTION = 1.0
"""Seconds added to the age a recovery requires (the ``Date`` header's resolution)."""
PROVE_AFTER = 2 / 3
"""A claim whose lease write answered this share of a visibility timeout (or more) after
its slot's write was sent proves the slot before going on (see ``docs/protocol.md``)."""
MAX_RECOVERY_PAGES = 10
RECOVERS = True
"""False: the reaper's pass recovers no slot. Only the simulation sets it, with
``gate.READS``, for the run of a world that has no limits (see there)."""
_INDEX = re.compile(r"^[0-9]{5}$")


def scope(keys: Keys, group: str | None = None) -> str:
    """The prefix of the queue's slots (``group=None``) or of one group's.

    >>> scope(Keys()), scope(Keys("r"), "tenant-42")
    ('_pail/slots/queue/', 'r/_pail/slots/group/tenant-42/')
    """
    if group is None:
        return f"{keys.slots()}{QUEUE_SCOPE}"
    return f"{keys.slots()}{GROUP_SCOPE}{group}/"


def slot_key(prefix: str, index: int) -> str:
    """The key of slot ``index`` under ``prefix`` (``scope``)."""
    return f"{prefix}{index:05d}"


def index_of(key: str, prefix: str) -> int | None:
    """The slot index ``key`` names under ``prefix``, or None (a key pail never writes there)."""
    if not key.startswith(prefix):
        return None
    tail = key[len(prefix) :]
    return int(tail) if _INDEX.match(tail) else None


def _is_slot(keys: Keys, key: str) -> bool:
    """True if ``key`` has the shape of a slot key of this queue (any scope)."""
    root = keys.slots()
    if not key.startswith(root):
        return False
    rest = key[len(root) :]
    parts = rest.split("/")
    if len(parts) == 2 and parts[0] + "/" == QUEUE_SCOPE:
        return bool(_INDEX.match(parts[1]))
    return len(parts) == 3 and parts[0] + "/" == GROUP_SCOPE and bool(_INDEX.match(parts[2]))


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """What a slot's body says: whose slot it is."""

    job_id: str
    lease: str
    """The ``lease`` token of the job's lease record (``LeaseRecord.lease``)."""
    run: str
    """The key of that lease (``run/{id}`` in the job's shard)."""
    write: str = field(default_factory=new_token)

    def encode(self) -> bytes:
        return dumps(
            {"v": 1, "job": self.job_id, "lease": self.lease, "run": self.run, "w": self.write},
            "slot",
        )

    @classmethod
    def decode(cls, body: bytes) -> SlotRecord:
        """The record in ``body``; ``DecodeError`` for anything else (never another exception)."""
        data = loads(body, "slot")
        if not isinstance(data, dict) or data.get("v") != 1:
            raise DecodeError("a slot must be a JSON object with v 1")
        fields = [data.get(name) for name in ("job", "lease", "run", "w")]
        if not all(isinstance(value, str) and value for value in fields):
            raise DecodeError("a slot's job, lease, run and w must be non-empty strings")
        job_id, lease, run, write = (str(value) for value in fields)
        return cls(job_id, lease, run, write)


@dataclass(frozen=True, slots=True)
class Held:
    """A slot this worker holds: what it wrote and when it sent that write (its monotonic clock)."""

    key: str
    etag: str
    record: SlotRecord
    sent_at: float
    group: str | None = None
    """The scope: None for the queue's limit, else the group's."""


def take(
    store: Store,
    key: str,
    record: SlotRecord,
    *,
    sent_at: float,
    group: str | None = None,
    stats: WriteStats | None = None,
) -> Held | None:
    """Hold slot ``key`` for ``record`` (create-only PUT); None if someone holds it."""
    won = put_conditional(
        store, key, record.encode(), record.write, if_none_match=True, stats=stats, reason="slot"
    )
    return None if won is None else Held(key, won.etag, record, sent_at, group)


def prove(
    store: Store, held: Held, *, sent_at: float, stats: WriteStats | None = None
) -> Held | None:
    """Rewrite the slot ``If-Match`` its ETag: the slot, still ours and fresh; None if it was taken."""
    record = SlotRecord(held.record.job_id, held.record.lease, held.record.run)
    won = put_conditional(
        store,
        held.key,
        record.encode(),
        record.write,
        if_match=held.etag,
        stats=stats,
        reason="slot",
    )
    return None if won is None else Held(held.key, won.etag, record, sent_at, held.group)


def give_back(store: Store, held: Held) -> bool:
    """Free the slot if it is still the one we wrote (``DELETE If-Match``); True if it is gone."""
    return delete_if_unchanged(store, held.key, held.etag)


def occupied(store: Store, prefix: str, limit: int) -> tuple[set[int], int]:
    """The indices below ``limit`` held under ``prefix`` (one LIST), and the keys listed."""
    page = store.list(prefix, max_keys=max(limit, 1) + 100)
    held = {index_of(item.key, prefix) for item in page.items}
    return {index for index in held if index is not None and index < limit}, len(page.items)


def lease_alive(store: Store, keys: Keys, record: SlotRecord) -> bool:
    """True while the lease ``record`` names may still run a handler (one GET).

    Alive: ``run/{id}`` holds a lease with that token, not fenced by a
    reaper and still ``running``. A run key that is not this job's lease
    key in any layout of the queue is not read: the slot is foreign.
    """
    if record.run not in {layout.run(record.job_id) for layout in keys.layouts(record.job_id)}:
        return False
    found = store.get(record.run)
    if found is None:
        return False
    try:
        lease = LeaseRecord.decode(found.body, record.job_id)
    except DecodeError:
        return False  # whatever holds run/{id} now, it is no lease of ours: the slot's is gone
    return lease.lease == record.lease and not lease.reaped and lease.state == RUNNING


@dataclass
class RecoveryReport:
    """What one recovery pass over the slots saw and did."""

    listed: int = 0
    recovered: int = 0
    foreign: int = 0
    """Slots whose bytes were not a slot (recovered like any other once old)."""
    skipped: int = 0
    """Keys under ``_pail/slots/`` that are no slot's (left alone)."""
    recovered_keys: list[str] = field(default_factory=list)


def recover(
    store: Store, keys: Keys, *, visibility_timeout: float, stats: WriteStats | None = None
) -> RecoveryReport:
    """Free the slots whose lease is gone: a LIST, then a GET of each old slot and of its lease.

    Only slots older than the visibility timeout (plus the clock's
    resolution, by the server's clock) are read: a claim proves a slot it
    wrote longer ago than that before it runs. A slot whose GET shows
    another ETag than its listing is left alone: it was written since, so
    its age is not the listing's. Never raises for foreign
    bytes; a storage error of one slot is logged and the pass goes on.
    """
    report = RecoveryReport()
    token: str | None = None
    old = timedelta(seconds=visibility_timeout + CLOCK_RESOLUTION)
    for _ in range(MAX_RECOVERY_PAGES):
        page = store.list(keys.slots(), continuation=token)
        for item in page.items:
            report.listed += 1
            if not _is_slot(keys, item.key):
                report.skipped += 1
                continue
            if page.server_time - item.last_modified <= old:
                continue
            try:
                _recover_one(store, keys, item, report)
            except PailError as exc:
                log.warning("slot %s: recovery failed, next pass retries: %s", item.key, exc)
        token = page.next_token
        if token is None:
            break
    return report


def written_since(found: StoredObject, listed: ObjectInfo) -> bool:
    """True if the slot a recovery read is not the one it listed (another ETag).

    Then it is a new holder's slot, as young as its write, which the listing's
    age says nothing about; its lease may not exist yet (a claim holds its
    slot before it writes its lease). The next pass judges it.
    """
    return found.etag != listed.etag


def _recover_one(store: Store, keys: Keys, item: ObjectInfo, report: RecoveryReport) -> None:
    found = store.get(item.key)
    if found is None or written_since(found, item):
        return
    try:
        record = SlotRecord.decode(found.body)
    except DecodeError as exc:
        log.warning("slot %s holds bytes that are no slot (%s): freeing it", item.key, exc)
        report.foreign += 1
    else:
        if lease_alive(store, keys, record):
            return
    if delete_if_unchanged(store, item.key, found.etag):
        report.recovered += 1
        report.recovered_keys.append(item.key)
