"""Short human texts shared by ``pail jobs`` and the dashboard."""

from __future__ import annotations

import json
from typing import Any


def duration(seconds: float | None) -> str:
    """A short duration: ``"4s"``, ``"3m 12s"``, ``"2h 5m"``, ``"3d 4h"``; ``"-"`` for None.

    >>> duration(192), duration(None), duration(90061)
    ('3m 12s', '-', '1d 1h')
    """
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, whole = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {whole}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def one_line(value: Any, limit: int = 120) -> str:
    """``value`` as one line (JSON unless a string), cut to ``limit`` characters.

    Never raises: a value JSON cannot encode (a NaN is fine, a cycle is not)
    is shown with ``repr``.

    >>> one_line({"progress": 0.5}), one_line("a\\nb")
    ('{"progress": 0.5}', 'a b')
    """
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
