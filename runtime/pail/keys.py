"""Object keys: every prefix the protocol uses, defined once.

The runtime, the CDK construct (lifecycle rules, grants) and the tests import
these names, so a prefix is never spelled twice.

A job's state is its key prefix, as in pailq 0.1.1::

    queue/{id}   pending: the job envelope, waiting to be claimed
    run/{id}     running: the lease, held by exactly one worker
    done/{id}    terminal: the handler's result (or ``null`` for a dead job)
    dlq/{id}     dead-lettered: the job, its attempts and the last error
    wait/{id}    waiting: a job whose dependencies have not all succeeded yet

A namespace puts every prefix under ``{namespace}/`` so several queues can
share one bucket.

A **sharded** queue (``shards`` > 1, a power of two) spreads every state's
keys over shard prefixes, so S3 can give each its own partition::

    queue/{s}/{id}   s = shard_of(id, shards): a hash of the id, mod shards

A job's keys all live in the shard its entry was written under, so a reader
of one job computes them from the id; after a queue grew its shard count,
a job written under a smaller count is found by trying the smaller counts'
shards in turn (``Keys.layouts``). One shard (the default) is exactly the
flat layout above, pailq 0.1.1's. ``docs/protocol.md`` ("Sharded queues").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

QUEUE = "queue/"
RUN = "run/"
DONE = "done/"
DLQ = "dlq/"
WAIT = "wait/"
"""A job waiting for its dependencies (``pail.protocol.dependencies``): not claimable yet."""

ALL_PREFIXES: tuple[str, ...] = (QUEUE, RUN, DONE, DLQ, WAIT)

# Not a job state: dedup key records (``pail.protocol.dedup``), named by a digest.
DEDUP = "keys/"

# Not a job state: pail's own bookkeeping, such as where the reaper's last pass
# stopped (``pail.protocol.reap_cursor``). It starts with "_", which no namespace
# can, so no queue's keys (or grants on them) ever fall under another's.
SYSTEM = "_pail/"
REAP_CURSOR = "reap-cursor"
PAUSED = "paused"
"""Under ``_pail/``: while this object exists, the queue is paused (``pail.protocol.pause``)."""
LAYOUT = "shards"
"""Under ``_pail/``: the queue's shard count, for processes not told it (``pail.protocol.layout``)."""
INDEX = f"{SYSTEM}index/"
"""The search index of tagged jobs (``pail.protocol.index``): one empty object per tag of a job."""
SCHEDULES = "schedules/"
"""Under ``_pail/``: one definition per schedule, named by it (``pail.protocol.schedules``)."""
LIMITS = "limits"
"""Under ``_pail/``: the queue's concurrency limits, one object (``pail.protocol.limits``)."""
SLOTS = "slots/"
"""Under ``_pail/``: one object per held concurrency slot (``pail.protocol.limits.slots``)."""
RATE = f"{SYSTEM}rate/"
"""Rate limits' start tokens (``pail.protocol.limits.rate``): one create-only object per start,
named by its scope, period, window and slot; a lifecycle rule expires them."""

_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

MAX_ID_LENGTH = 512
"""The longest job id pail reads or accepts (``pail.ids.validate_job_id``)."""

MAX_SHARDS = 1024
"""The most shards a queue may have (S3 scales a prefix to 3,500 writes/s; 1,024 of them is plenty)."""

FLAT = ""
"""The shard segment of the flat (unsharded) layout."""


def validate_shards(shards: int) -> int:
    """Return ``shards`` if it is a valid shard count (a power of two, 1 to 1024), else ``ValueError``.

    >>> validate_shards(16)
    16
    """
    if (
        isinstance(shards, bool)
        or not isinstance(shards, int)
        or not 1 <= shards <= MAX_SHARDS
        or shards & (shards - 1)
    ):
        raise ValueError(f"shards must be a power of two from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards


def shard_of(job_id: str, shards: int) -> int:
    """The shard of ``job_id`` in a queue of ``shards`` shards: a hash of the id, mod ``shards``.

    A hash, not a character of the id: ULIDs share their leading characters,
    and a caller's own ids (``enqueue_once``) may follow any pattern. Because
    ``shards`` is a power of two, a job's shard under a count is its shard
    under a larger count, mod the smaller one.

    >>> shard_of("01J0000000000000000000000A", 1)
    0
    >>> shard_of("01J0000000000000000000000A", 16) % 4 == shard_of("01J0000000000000000000000A", 4)
    True
    """
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % shards


def _segment(shard: int) -> str:
    return f"{shard}/"


def _parse_segment(text: str) -> int | None:
    """The shard a key segment names (canonical decimal, below ``MAX_SHARDS``), or None."""
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        return None
    shard = int(text)
    return shard if shard < MAX_SHARDS else None


def validate_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is a valid queue name, else raise ``ValueError``.

    >>> validate_namespace("reports")
    'reports'
    """
    if namespace and not _NAMESPACE.match(namespace):
        raise ValueError(
            f"invalid queue namespace {namespace!r}: use 1-63 characters of a-z, 0-9, '-' "
            "and '_', starting with a letter or digit"
        )
    if f"{namespace}/" in (*ALL_PREFIXES, DEDUP):
        # "queue" would put its jobs at queue/queue/{id}, inside the default
        # queue's own listing: the two queues would claim each other's jobs.
        raise ValueError(
            f"invalid queue namespace {namespace!r}: it is the name of a key prefix "
            f"({', '.join(p.rstrip('/') for p in (*ALL_PREFIXES, DEDUP))})"
        )
    return namespace


@dataclass(frozen=True, slots=True)
class Keys:
    """Builds and parses the keys of one queue (one namespace) in a bucket.

    ``shards`` is the queue's shard count. ``pin`` binds the keys to one
    shard segment (``"3/"``, or ``FLAT``): the keys of the shard a job was
    found in, which every write about that job uses. Unpinned keys of a
    sharded queue name a job's shard under the current count, and their
    ``prefix`` is the whole state, every shard included (a listing of it
    counts them all).

    >>> Keys("reports").queue("01J0000000000000000000000A")
    'reports/queue/01J0000000000000000000000A'
    >>> Keys().job_id("done/01J0000000000000000000000A")
    '01J0000000000000000000000A'
    >>> Keys(shards=4).queue("01J0000000000000000000000A")
    'queue/3/01J0000000000000000000000A'
    """

    namespace: str = ""
    shards: int = 1
    pin: str | None = None

    def __post_init__(self) -> None:
        validate_namespace(self.namespace)
        validate_shards(self.shards)

    @property
    def root(self) -> str:
        return f"{self.namespace}/" if self.namespace else ""

    @property
    def sharded(self) -> bool:
        """True for the unpinned keys of a queue of more than one shard."""
        return self.pin is None and self.shards > 1

    def segment(self, job_id: str) -> str:
        """The shard segment of ``job_id``'s keys (``""`` in the flat layout)."""
        if self.pin is not None:
            return self.pin
        return _segment(shard_of(job_id, self.shards)) if self.shards > 1 else FLAT

    def prefix(self, state: str) -> str:
        return f"{self.root}{state}{self.pin or ''}"

    def job_prefix(self, state: str, job_id: str) -> str:
        """The prefix ``job_id``'s key of ``state`` lives under (its shard's).

        >>> Keys(shards=4).job_prefix(QUEUE, "01J0000000000000000000000A")
        'queue/3/'
        """
        return f"{self.root}{state}{self.segment(job_id)}"

    def queue(self, job_id: str) -> str:
        return f"{self.job_prefix(QUEUE, job_id)}{job_id}"

    def run(self, job_id: str) -> str:
        return f"{self.job_prefix(RUN, job_id)}{job_id}"

    def done(self, job_id: str) -> str:
        return f"{self.job_prefix(DONE, job_id)}{job_id}"

    def dlq(self, job_id: str) -> str:
        return f"{self.job_prefix(DLQ, job_id)}{job_id}"

    def wait(self, job_id: str) -> str:
        """The waiting record of a job whose dependencies have not all succeeded.

        >>> Keys("reports").wait("01J0000000000000000000000A")
        'reports/wait/01J0000000000000000000000A'
        """
        return f"{self.job_prefix(WAIT, job_id)}{job_id}"

    def pinned(self, segment: str) -> Keys:
        """These keys bound to one shard segment (``"3/"``, or ``FLAT``)."""
        return replace(self, pin=segment)

    def sources(self) -> tuple[Keys, ...]:
        """The pinned keys of every place a pending job may be: the flat layout, then each shard.

        One shard: these keys alone (the flat layout). More: the flat layout
        too, where the jobs written before the queue was first sharded wait.

        >>> [k.prefix(QUEUE) for k in Keys(shards=2).sources()]
        ['queue/', 'queue/0/', 'queue/1/']
        """
        if not self.sharded:
            return (self,)
        return (self.pinned(FLAT), *(self.pinned(_segment(s)) for s in range(self.shards)))

    def layouts(self, job_id: str) -> tuple[Keys, ...]:
        """The pinned keys ``job_id`` may live under, most likely first.

        Its shard under the current count, then under each smaller power of
        two (the counts the queue grew through), then the flat layout: a job
        keeps the shard it was enqueued in for life.

        >>> [k.queue("01J0000000000000000000000A") for k in Keys(shards=4).layouts("01J0000000000000000000000A")]
        ['queue/3/01J0000000000000000000000A', 'queue/1/01J0000000000000000000000A', 'queue/01J0000000000000000000000A']
        """
        if not self.sharded:
            return (self,)
        segments: list[str] = []
        width = self.shards
        while width > 1:
            segment = _segment(shard_of(job_id, width))
            if segment not in segments:
                segments.append(segment)
            width //= 2
        return (*(self.pinned(s) for s in segments), self.pinned(FLAT))

    def split(self, key: str, state: str) -> tuple[str, str] | None:
        """``(segment, rest)`` of a key under ``state``'s prefix, or None if it is not under it.

        Unpinned keys of a sharded queue take a leading shard segment off
        ``rest``; others keep ``rest`` whole.
        """
        prefix = self.prefix(state)
        if not key.startswith(prefix):
            return None
        rest = key[len(prefix) :]
        if self.pin is not None or self.shards == 1:
            return self.pin or FLAT, rest
        head, slash, tail = rest.partition("/")
        if slash and _parse_segment(head) is not None:
            return _segment(int(head)), tail
        return FLAT, rest

    def of_key(self, key: str, state: str) -> Keys:
        """The pinned keys of the shard ``key`` (a key under ``state``) lives in.

        >>> Keys(shards=4).of_key("run/3/01J0000000000000000000000A", RUN).run("x")
        'run/3/x'
        """
        if not self.sharded:
            return self
        parts = self.split(key, state)
        return self.pinned(parts[0] if parts is not None else FLAT)

    def dedup(self, digest: str) -> str:
        return f"{self.root}{DEDUP}{digest}"

    def reap_cursor(self) -> str:
        """The object that says where the reaper's next pass over ``run/`` starts.

        >>> Keys("reports").reap_cursor()
        'reports/_pail/reap-cursor'
        """
        return f"{self.root}{SYSTEM}{REAP_CURSOR}"

    def paused(self) -> str:
        """The marker object whose presence pauses the queue: claimers take no job while it exists.

        >>> Keys("reports").paused(), Keys().paused()
        ('reports/_pail/paused', '_pail/paused')
        """
        return f"{self.root}{SYSTEM}{PAUSED}"

    def layout_marker(self) -> str:
        """The object that records the queue's shard count (``pail.protocol.layout``).

        >>> Keys("reports").layout_marker()
        'reports/_pail/shards'
        """
        return f"{self.root}{SYSTEM}{LAYOUT}"

    def schedules(self) -> str:
        """The prefix of the queue's schedule definitions (``pail.protocol.schedules``).

        >>> Keys("reports").schedules(), Keys().schedules()
        ('reports/_pail/schedules/', '_pail/schedules/')
        """
        return f"{self.root}{SYSTEM}{SCHEDULES}"

    def limits(self) -> str:
        """The object that holds the queue's concurrency limits (``pail.protocol.limits``).

        >>> Keys("reports").limits(), Keys().limits()
        ('reports/_pail/limits', '_pail/limits')
        """
        return f"{self.root}{SYSTEM}{LIMITS}"

    def slots(self) -> str:
        """The prefix of the queue's held concurrency slots (``pail.protocol.limits.slots``).

        >>> Keys("reports").slots()
        'reports/_pail/slots/'
        """
        return f"{self.root}{SYSTEM}{SLOTS}"

    def schedule(self, name: str) -> str:
        """The definition object of schedule ``name`` (validated by ``pail.protocol.schedules``)."""
        return f"{self.schedules()}{name}"

    def rate_tokens(self) -> str:
        """The prefix of the queue's rate-limit start tokens (``pail.protocol.limits.rate``).

        >>> Keys("reports").rate_tokens(), Keys().rate_tokens()
        ('reports/_pail/rate/', '_pail/rate/')
        """
        return f"{self.root}{RATE}"

    def entry_id(self, key: str, state: str) -> str | None:
        """The job id of ``key`` under ``state``'s prefix, or None if the key names no job.

        What follows the prefix must be one segment of 1 to ``MAX_ID_LENGTH``
        characters. A zero-byte "folder" that the S3 console makes
        (``queue/``, ``queue/reports/``) and a nested key (``queue/a/b``) name
        no job: pail never writes them, and every reader passes them by.

        >>> keys = Keys()
        >>> keys.entry_id("queue/01J0000000000000000000000A", QUEUE)
        '01J0000000000000000000000A'
        >>> keys.entry_id("queue/", QUEUE) is None, keys.entry_id("queue/a/b", QUEUE) is None
        (True, True)
        """
        parts = self.split(key, state)
        if parts is None:
            return None
        job_id = parts[1]
        if not job_id or "/" in job_id or len(job_id) > MAX_ID_LENGTH:
            return None
        return job_id

    def job_id(self, key: str) -> str:
        """The job id of any key of this queue (the part after the state prefix)."""
        for state in ALL_PREFIXES:
            parts = self.split(key, state)
            if parts is not None:
                return parts[1]
        raise ValueError(f"key {key!r} is not a job key of queue {self.namespace!r}")
