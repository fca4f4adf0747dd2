"""The protocol's replaceable steps: the one seam through which a test puts a known-bad variant in.

A known-bad variant is the code of one protocol step as it was before a fix
(``regressions.py``), or a step broken on purpose to show that an invariant
can fail (``test_features.py``, ``test_hostile.py``). Each step is one
decision or write of ``docs/protocol.md`` ("the claim's step 3", "the
reaper's finish of an expired lease"), named here once, with where the
runtime keeps it. A variant names the step, never the runtime's attribute::

    def test_...(monkeypatch: pytest.MonkeyPatch) -> None:
        CLAIM_PROVE_LEASE.replace(monkeypatch, lambda self, lease: True)

``replace`` puts the variant in every place the runtime looks the step up
(the class, or the defining module and every ``pail`` module that imported
the function by name), and first checks that the variant takes the same
parameters as the step it replaces (mypy checks the same statically): a
step that changed shape fails at once with its name, rather than letting a
stale variant pass for the bug, and one that moved or was renamed fails
here, at its line. ``current`` is the runtime's own step, for a variant that
wraps it. When the runtime moves a step, only its line here changes.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest

from pail import codec, status
from pail.protocol import cancel, dedup, delay, redrive, transitions
from pail.protocol.claim import Claimer
from pail.protocol.dependencies import graph
from pail.protocol.reaper import Reaper


@dataclass(frozen=True, slots=True)
class Step[F: Callable[..., Any]]:
    """One replaceable step: the function ``like`` that ``home`` (a class or a module) keeps."""

    home: Any
    like: F
    does: str
    """What the step decides or writes, in the words of docs/protocol.md."""

    @property
    def attribute(self) -> str:
        return self.like.__name__

    @property
    def where(self) -> str:
        home = getattr(self.home, "__qualname__", None) or self.home.__name__
        return f"{home}.{self.attribute}"

    @property
    def current(self) -> F:
        """The runtime's own step, as it is now."""
        found = inspect.getattr_static(self.home, self.attribute, None)
        if found is None:
            raise LookupError(
                f"the protocol step {self.does!r} is no longer {self.where}: "
                "point its line in tests/simulation/steps.py at its new home"
            )
        return cast(F, found)

    def replace(self, monkeypatch: pytest.MonkeyPatch, variant: F) -> None:
        """Put ``variant`` where the runtime looks this step up, until the test ends."""
        current = self.current
        _same_parameters(self, current, variant)
        if inspect.isclass(self.home):
            monkeypatch.setattr(self.home, self.attribute, variant)
            return
        for module in _pail_modules():
            for name, value in list(vars(module).items()):
                if value is current:
                    monkeypatch.setattr(module, name, variant)


# --- the claim (docs/protocol.md: Claim) ------------------------------------------

CLAIM_REFILL = Step(
    Claimer, Claimer._refill, "a refill: one page listed, then one HEAD of the pause marker"
)
CLAIM_TRY = Step(Claimer, Claimer._try, "the claim of one listed entry, steps 1 to 5")
CLAIM_TAKE_PENDING = Step(
    Claimer,
    Claimer._take_pending,
    "step 3: the conditional DELETE of the entry, and what a 404 means",
)
CLAIM_PROVE_LEASE = Step(
    Claimer, Claimer._proven, "step 4: the lease proven before the handler starts"
)
CLAIM_ENDED = Step(Claimer, Claimer._ended, "the check of done/ before a claim runs the job")
CLAIM_TELL_ENDED = Step(
    Claimer,
    Claimer._tell_ended,
    "an ended job's entry tells its dependents before the claim drops it",
)
CLAIM_QUARANTINE = Step(Claimer, Claimer._quarantine, "a foreign entry quarantined where it is")
CLAIM_READY_KEYS = Step(delay, delay.claimable_keys, "the claimable keys of a page: due jobs")

# --- settling and the reaper (Settle, Reap) ---------------------------------------

REQUEUE = Step(transitions, transitions.requeue, "a requeue: a new pending entry, the lease gone")
REQUEUE_ENSURE_PENDING = Step(
    transitions, transitions._ensure_pending, "the requeue's entry, fresh bytes on every try"
)
MARKER_BYTES = Step(codec, codec.marker_body, "the bytes of a dead or cancelled marker")
REAPER_TAKE_CLAIMED_ENTRY = Step(
    Reaper, Reaper._take_claimed_entry, "an expired lease's pending entry taken as its claim's"
)
REAPER_FINISH = Step(Reaper, Reaper._finish, "an expired lease finished (requeue, dead letter)")
REAPER_RECLAIM = Step(Reaper, Reaper._reclaim, "one expired lease reclaimed")

# --- redrive, cancel and status (Redrive, Cancel, Status) ------------------------

REDRIVE_TOOK_BACK = Step(redrive, redrive.took_back, "a half-done redrive finished by a reader")
REDRIVE_LATER_LIFE = Step(redrive, redrive.later_life, "a late dead letter of a life taken back")
REDRIVE_CLEAR_LATE_RECORD = Step(
    redrive, redrive.clear_late_record, "a record re-created between a redrive's two deletes"
)
CANCEL_FINISH_PENDING = Step(
    cancel, cancel.finish_pending, "a cancellation's steps after its commit point"
)
CANCEL_MARK = Step(
    cancel, cancel._mark_terminal, "the cancelled marker, unless the job has an outcome: which won"
)
STATUS_READ = Step(status, status._read_once, "one read of a job's status, done/ first")

# --- dedup keys (Dedup keys) -------------------------------------------------------

DEDUP_REPAIR = Step(
    dedup, dedup._repair, "a repeat's repair: the job's first record (wait/ if it waits)"
)

# --- dependencies (docs/dependencies.md) --------------------------------------------

FAN_OUT = Step(
    graph,
    graph.fan_out,
    "a handler's fan-out: its lease names the continuation, the continuation's record, "
    "then each child",
)

STEPS: tuple[Step[Any], ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Step))


def _same_parameters(
    step: Step[Any], current: Callable[..., Any], variant: Callable[..., Any]
) -> None:
    """The variant takes the step's parameters (by name), unless it takes ``*args, **kwargs``."""
    wanted = _parameters(inspect.unwrap(current))
    given = _parameters(variant)
    if "*" in given:
        return
    if given != wanted:
        raise TypeError(
            f"the known-bad variant of {step.where} takes {given}, the step now takes {wanted}: "
            "the step changed shape; write its variant again from the runtime's code"
        )


def _parameters(function: Callable[..., Any]) -> list[str]:
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        "*" if p.kind in kinds else p.name for p in inspect.signature(function).parameters.values()
    ]


def _pail_modules() -> list[Any]:
    return [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "pail"]
