"""Concurrency limits and fair sharing across groups, with nothing but the bucket.

* ``config``: the queue's limits (``_pail/limits``), read by every claimer
  at its refills; ``set_limit``, ``read``, ``clear``.
* ``groups``: a job's group is the tail of its id (``{ULID}~tenant-42``), so
  a listing tells it; a page's groups are interleaved for fair sharing.
* ``slots``: one object per running job a limit counts, naming its lease;
  held create-only, given back ``If-Match``, recovered by the reaper's pass
  once the lease it names is gone.
* ``gate``: the claimer's side, ``Gate.admit`` (the one place a job is let
  start; a rate gate plugs in there).
* ``rate``: at most R starts per window of the server's clock, per queue and
  per group (``docs/limits.md``).

``give_back`` is what every settle calls. docs/limits.md says what each
limit guarantees and costs; docs/protocol.md ("Limits") has every write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pail.errors import PailError
from pail.protocol.limits import slots
from pail.protocol.limits.config import NONE, Limits, clear, read, set_limit
from pail.protocol.limits.gate import Gate, Refusal
from pail.protocol.limits.groups import group_of, grouped_id
from pail.protocol.limits.slots import Held, RecoveryReport, recover
from pail.store.base import Store

if TYPE_CHECKING:
    from pail.protocol.lease import Lease

__all__ = [
    "NONE",
    "Gate",
    "Held",
    "Limits",
    "RecoveryReport",
    "Refusal",
    "clear",
    "give_back",
    "group_of",
    "grouped_id",
    "read",
    "recover",
    "set_limit",
]

log = logging.getLogger("pail")


def give_back(
    store: Store, lease: Lease, later: Callable[[str, Callable[[], object]], None] | None = None
) -> None:
    """Give back every slot ``lease``'s job holds (``DELETE If-Match`` each); no request without.

    Called once the job's handler is over, whatever the settle found (the
    lease lost included: the slot then names a fenced lease, and freeing it
    if it is still ours is right). ``later`` (``Overlap.later``) sends the
    deletes in the background; without it they are sent now, and a failure
    is logged: the recovery pass frees the slot once its lease is gone.
    """
    held = lease.take_slots()
    for slot in held:
        if later is not None:
            later(f"job {lease.job_id}: giving back slot {slot.key}", _deleter(store, slot))
        else:
            try:
                slots.give_back(store, slot)
            except PailError as exc:
                log.warning("slot %s: could not give it back: %s", slot.key, exc)
        if lease.slot_returned is not None:
            lease.slot_returned(slot)


def _deleter(store: Store, slot: Held) -> Callable[[], object]:
    return lambda: slots.give_back(store, slot)
