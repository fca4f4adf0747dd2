"""The queue page's limit forms: what an operator typed, checked before anything is written.

A form names a ``kind`` (``concurrency``, ``rate`` or ``clear``), a
``value`` and a ``group``; ``parse`` turns it into a ``LimitChange`` or a
``BadLimitError`` whose ``code`` is a notice of ``views.NOTICES``. Every
field is foreign input (another tab, a hand-made POST): nothing here raises
anything else, and nothing is echoed back, so a 10 KB value costs nothing.

A concurrency of 0 is refused although ``Pail.set_limit(0)`` takes it: it
stops every claim, which is what Pause does, visibly and with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pail.errors import ConfigurationError
from pail.protocol.limits import groups
from pail.protocol.limits.config import MAX_CONCURRENCY
from pail.protocol.limits.rate import Rate

NONE = "none"
"""What removes a limit, as in ``pail limit concurrency jobs none``; an empty value does too."""
MAX_VALUE = 100
"""Characters of a value or group read at most: longer is refused unread."""
_WHOLE = re.compile(r"[0-9]{1,6}")


class Kind(Enum):
    CONCURRENCY = "concurrency"
    RATE = "rate"
    CLEAR = "clear"


class BadLimitError(Exception):
    """A form that changes nothing; ``code`` names the notice that says why."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True, slots=True)
class LimitChange:
    """One checked change: ``Pail.set_limit``, ``Pail.set_rate`` or ``Pail.clear_limits``."""

    kind: Kind
    concurrency: int | None = None
    rate: Rate | None = None
    group: str | None = None
    """None: the queue's own limit; ``"*"``: every group's without one; else that group's."""

    @property
    def removes(self) -> bool:
        return self.concurrency is None and self.rate is None

    @property
    def scope(self) -> str:
        """Whose limit, for people: ``the queue``, ``every group``, ``group tenant-42``."""
        if self.group is None:
            return "the queue"
        return "every group" if self.group == groups.DEFAULT else f"group {self.group}"

    @property
    def value_text(self) -> str:
        """The value as the form sends it back (``5``, ``10/s``, ``none``)."""
        if self.kind is Kind.CONCURRENCY and self.concurrency is not None:
            return str(self.concurrency)
        if self.kind is Kind.RATE and self.rate is not None:
            return str(self.rate)
        return NONE

    def fields(self) -> dict[str, str]:
        """The form fields that ask for this change again (the confirmation page's)."""
        return {"kind": self.kind.value, "value": self.value_text, "group": self.group or ""}

    def notice(self) -> tuple[str, str]:
        """The notice code for the change once made, and its ``n`` (the value)."""
        if self.kind is Kind.CLEAR:
            return "limits-cleared", ""
        done = "removed" if self.removes else "set"
        return f"{self.kind.value}-{done}", self.value_text


def _field(form: dict[str, str], name: str) -> str:
    value = form.get(name, "")
    if len(value) > MAX_VALUE:
        raise BadLimitError("limit-too-long")
    return value.strip()


def parse(form: dict[str, str]) -> LimitChange:
    """The change a limit form asks for, or ``BadLimitError``.

    >>> parse({"kind": "concurrency", "value": "5", "group": "*"})
    LimitChange(kind=<Kind.CONCURRENCY: 'concurrency'>, concurrency=5, rate=None, group='*')
    >>> parse({"kind": "rate", "value": "10/s"}).rate
    Rate(max=10, per=1)
    >>> parse({"kind": "concurrency", "value": "None"}).removes
    True
    >>> parse({"kind": "concurrency", "value": "0"})
    Traceback (most recent call last):
    ...
    pail.dashboard.limits_form.BadLimitError: concurrency-zero
    """
    try:
        kind = Kind(form.get("kind", ""))
    except ValueError:
        raise BadLimitError("limit-bad-form") from None
    if kind is Kind.CLEAR:
        return LimitChange(kind)
    value, group = _field(form, "value"), _field(form, "group") or None
    if group is not None and group != groups.DEFAULT and not groups.valid(group):
        raise BadLimitError("limit-bad-group")
    removes = value == "" or value.lower() == NONE
    if kind is Kind.CONCURRENCY:
        return LimitChange(kind, concurrency=None if removes else _concurrency(value), group=group)
    return LimitChange(kind, rate=None if removes else _rate(value), group=group)


def _concurrency(value: str) -> int:
    if _WHOLE.fullmatch(value) is None or int(value) > MAX_CONCURRENCY:
        raise BadLimitError("concurrency-invalid")
    if int(value) == 0:
        raise BadLimitError("concurrency-zero")
    return int(value)


def _rate(value: str) -> Rate:
    try:
        return Rate.parse(value)
    except ConfigurationError:
        raise BadLimitError("rate-invalid") from None
