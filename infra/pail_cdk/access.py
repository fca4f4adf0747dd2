"""Who may do what to which prefix of a queue: the grants, written down as data.

Each role's access is a table from a key prefix (``pail.keys``) to S3 actions,
derived from the protocol (``docs/protocol.md`` and ``pail.protocol``):

* **Producers** create ``queue/{id}``: ``s3:PutObject`` on ``queue/*``, nothing else.
  Producers that enqueue with dedup keys also create and read ``keys/{digest}``
  and read the job's status.
* **Workers** read and write every state of their queue: a claim reads the
  pending entry, creates the ``run/`` lease and deletes the pending entry; a
  heartbeat rewrites the lease; settling writes ``done/`` or the ``dlq/``
  record (and a retry writes ``queue/``); finishing an interrupted redrive
  deletes a dead marker under ``done/`` and its ``dlq/`` record. Claims list
  ``queue/``, HEAD the pause marker ``_pail/paused`` and GET the limits
  ``_pail/limits``; under limits they take and give back slots (``_pail/slots/``)
  and create rate tokens (``_pail/rate/``). Nothing else of ``_pail/``.
* **The reaper** lists ``run/`` for expired leases and every prefix for the
  depth metrics; it fences and deletes leases, requeues under ``queue/`` and
  dead-letters under ``done/`` and ``dlq/``, and keeps its position in
  ``run/`` under ``_pail/``. It deletes under all four prefixes: the pending
  entry a crashed claim left beside its lease (reap step 4, ``If-Match`` the
  entry the claim read), and, when it meets a redrive that stopped half-way
  (``redrive.finish``), the old life's ``dlq/`` record and ``done/`` dead
  marker, each ``If-Match`` what it read. It never deletes a result: a
  conditional delete of a dead marker cannot match a result's ETag.
* **Result readers** get ``done/{id}``.

Two S3 rules shape the statements:

* A conditional write (``If-None-Match``, ``If-Match``) needs only
  ``s3:PutObject``, a conditional delete only ``s3:DeleteObject``; a HEAD is a
  ``s3:GetObject``.
* S3 answers a GET or HEAD of a missing key with 403 instead of 404 unless the
  caller may list that key; it evaluates ``s3:prefix`` as the key itself. The
  runtime reads "missing" as a state (a pending result, a free lease), so
  whoever may read a prefix may also list it: ``s3:ListBucket`` on the bucket,
  with an ``s3:prefix`` condition naming exactly those prefixes.

No statement names the bucket's objects as a whole (``bucket/*``): every object
ARN ends in ``{namespace}/{prefix}*``, where the wildcard is a job id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from pail.keys import (
    ALL_PREFIXES,
    DEDUP,
    DONE,
    INDEX,
    LIMITS,
    PAUSED,
    QUEUE,
    RATE,
    SCHEDULES,
    SLOTS,
    SYSTEM,
    Keys,
)
from pail_cdk import nag

GET = "s3:GetObject"
PUT = "s3:PutObject"
DELETE = "s3:DeleteObject"
LIST = "s3:ListBucket"

_READ_WRITE_DELETE = (GET, PUT, DELETE)
_READ_WRITE = (GET, PUT)


@dataclass(frozen=True, slots=True)
class Access:
    """The S3 actions one role needs on each prefix of a queue, and which prefixes it lists."""

    objects: Mapping[str, tuple[str, ...]]
    lists: tuple[str, ...] = field(default=())

    @property
    def read_only(self) -> bool:
        """True when the role only reads (a directory bucket then grants ``ReadOnly`` sessions)."""
        return all(actions == (GET,) for actions in self.objects.values())


ENQUEUE = Access(objects={QUEUE: (PUT,)})
# A keyed enqueue creates and reads its key record under keys/, and reads the
# job's status (every state) to tell a repeat from a record whose entry was
# never written.
ENQUEUE_KEYED = Access(
    objects={**dict.fromkeys(ALL_PREFIXES, (GET,)), QUEUE: _READ_WRITE, DEDUP: _READ_WRITE},
    lists=(*ALL_PREFIXES, DEDUP),
)
PAUSE_MARKER = f"{SYSTEM}{PAUSED}"
"""The one key under ``_pail/`` a worker reads: a claim's refill HEADs it (``pail.protocol.pause``)."""
LIMITS_OBJECT = f"{SYSTEM}{LIMITS}"
"""The queue's limits (``pail.protocol.limits``): a refill or a named claim GETs it."""
SLOT_OBJECTS = f"{SYSTEM}{SLOTS}"
"""Held concurrency slots: a claim creates one, a settle deletes it ``If-Match``."""
# A worker's refill HEADs the pause marker and GETs the limits; listing them makes a missing
# one a 404, not a 403. Under a limit it creates, lists and gives back slots, and under a
# rate limit it creates and lists start tokens (never reads or deletes one: a lifecycle rule
# or `pail limit sweep` removes them).
CONSUME = Access(
    objects={
        **dict.fromkeys(ALL_PREFIXES, _READ_WRITE_DELETE),
        PAUSE_MARKER: (GET,),
        LIMITS_OBJECT: (GET,),
        SLOT_OBJECTS: _READ_WRITE_DELETE,
        RATE: (PUT,),
    },
    lists=(*ALL_PREFIXES, PAUSE_MARKER, LIMITS_OBJECT, SLOT_OBJECTS, RATE),
)
# The reaper finishes what a crashed owner, claimer or redrive left (see the module
# docstring), so it deletes under every state prefix; and it keeps where its last pass
# over run/ stopped under _pail/, which it never deletes.
# It runs the schedules' ticks: a keyed enqueue (keys/ and queue/), and it syncs
# the deploy's schedules, so it deletes under _pail/schedules/; it recovers the slots of dead
# workers, so it deletes under _pail/slots/ (nowhere else in _pail/). It writes the deploy's
# limits to _pail/limits.
SCHEDULE_DEFINITIONS = f"{SYSTEM}{SCHEDULES}"
REAP = Access(
    objects={
        **dict.fromkeys((*ALL_PREFIXES, SCHEDULE_DEFINITIONS, SLOT_OBJECTS), _READ_WRITE_DELETE),
        SYSTEM: _READ_WRITE,
        DEDUP: _READ_WRITE,
    },
    lists=(*ALL_PREFIXES, SYSTEM, DEDUP),
)
READ_RESULTS = Access(objects={DONE: (GET,)}, lists=(DONE,))
READ_STATUS = Access(objects=dict.fromkeys(ALL_PREFIXES, (GET,)), lists=ALL_PREFIXES)
# A tagged enqueue writes one empty entry per tag under _pail/index/ first (pail.protocol.index).
ENQUEUE_TAGGED = Access(objects={QUEUE: (PUT,), INDEX: (PUT,)})
ENQUEUE_KEYED_TAGGED = Access(
    objects={**ENQUEUE_KEYED.objects, INDEX: (PUT,)}, lists=ENQUEUE_KEYED.lists
)
# A search lists the index and reads each job's status; it deletes an entry whose job is
# gone (an hour old and found nowhere), the only write it makes.
SEARCH = Access(
    objects={**dict.fromkeys(ALL_PREFIXES, (GET,)), INDEX: (GET, DELETE)},
    lists=(*ALL_PREFIXES, INDEX),
)

_WILDCARD_REASON = (
    "The object ARN is scoped to one key prefix of a pail queue, '{prefix}'; the trailing "
    "wildcard stands for the job id, which is only known at run time."
)


def grant(bucket: s3.IBucket, keys: Keys, grantee: iam.IGrantable, access: Access) -> iam.Grant:
    """Give ``grantee`` exactly ``access`` on the queue ``keys`` in ``bucket``.

    Prefixes that need the same actions share one statement. The IAM5 findings
    for the prefix wildcards are acknowledged on the grantee, with the reason.
    """
    by_actions: dict[tuple[str, ...], list[str]] = {}
    for prefix, actions in access.objects.items():
        by_actions.setdefault(tuple(sorted(actions)), []).append(prefix)
    grants: list[iam.Grant] = []
    object_arns: dict[str, str] = {}  # prefix -> its object ARN
    for actions, prefixes in by_actions.items():
        arns = [bucket.arn_for_objects(f"{keys.prefix(prefix)}*") for prefix in prefixes]
        object_arns.update(zip(prefixes, arns, strict=True))
        grants.append(
            iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=arns)
        )
    if access.lists:
        grants.append(
            iam.Grant.add_to_principal(
                grantee=grantee,
                actions=[LIST],
                resource_arns=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": list_patterns(keys, access.lists)}},
            )
        )
    if bucket.encryption_key is not None:
        if any(PUT in actions for actions in access.objects.values()):
            grants.append(bucket.encryption_key.grant_encrypt_decrypt(grantee))
        else:
            grants.append(bucket.encryption_key.grant_decrypt(grantee))
    principal = grantee.grant_principal
    if isinstance(principal, Construct):
        for prefix, arn in object_arns.items():
            nag.acknowledge_wildcard_resources(
                principal, [arn], _WILDCARD_REASON.format(prefix=keys.prefix(prefix))
            )
    combined = grants[0]
    for other in grants[1:]:
        combined = combined.combine(other)
    return combined


def list_patterns(keys: Keys, prefixes: tuple[str, ...]) -> list[str]:
    """The ``s3:prefix`` values that let a role list (and HEAD) exactly ``prefixes``."""
    return [f"{keys.prefix(prefix)}*" for prefix in prefixes]
