"""Throughput as a server-side SVG bar chart: jobs finished per minute, last hour.

No JavaScript and no chart library: the SVG is built here, with a ``<title>``
and a ``<desc>`` that say in words what the bars show, for screen readers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from html import escape

from pail.codec import OUTCOME_CANCELLED, OUTCOME_DEAD, OUTCOME_SUCCEEDED
from pail.operate.snapshot import Finish

MINUTES = 60
WIDTH, HEIGHT = 720, 160
LEFT, BOTTOM, TOP = 34, 22, 10
SERIES = (
    (OUTCOME_SUCCEEDED, "succeeded", "bar-done"),
    (OUTCOME_CANCELLED, "cancelled", "bar-cancelled"),
    (OUTCOME_DEAD, "dead-lettered", "bar-dead"),
)


def per_minute(
    finishes: Iterable[Finish], now: datetime, minutes: int = MINUTES
) -> list[dict[str, int]]:
    """Counts per outcome for each of the last ``minutes`` minutes, oldest first.

    >>> from datetime import UTC, timedelta
    >>> now = datetime(2026, 1, 1, tzinfo=UTC)
    >>> bins = per_minute([Finish(now - timedelta(seconds=30), "succeeded")], now)
    >>> len(bins), bins[-1]["succeeded"]
    (60, 1)
    """
    bins: list[dict[str, int]] = [
        dict.fromkeys((s for s, _, _ in SERIES), 0) for _ in range(minutes)
    ]
    for finish in finishes:
        ago = (now - finish.at).total_seconds()
        if 0 <= ago < minutes * 60 and finish.outcome in bins[0]:
            bins[minutes - 1 - int(ago // 60)][finish.outcome] += 1
    return bins


def throughput_svg(finishes: Iterable[Finish], now: datetime, note: str = "") -> str:
    """The chart as an inline ``<svg>`` element."""
    bins = per_minute(finishes, now)
    totals = [sum(b.values()) for b in bins]
    peak = max(totals) if totals else 0
    scale = max(peak, 1)
    plot_w, plot_h = WIDTH - LEFT - 6, HEIGHT - BOTTOM - TOP
    bar_w = plot_w / MINUTES
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">',
        '<title id="chart-title">Jobs finished per minute, last 60 minutes</title>',
    ]
    total = sum(totals)
    by_outcome = {label: sum(b[s] for b in bins) for s, label, _ in SERIES}
    words = ", ".join(f"{n} {label}" for label, n in by_outcome.items())
    parts.append(
        f'<desc id="chart-desc">{total} jobs finished in the last hour ({escape(words)}); '
        f"peak {peak} per minute. {escape(note)}</desc>"
    )
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - 6}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{round(scale * fraction)}</text>"
        )
    for index, counts in enumerate(bins):
        base: float = TOP + plot_h
        x = LEFT + index * bar_w
        for outcome, _, css in SERIES:
            if not counts[outcome]:
                continue
            height = plot_h * counts[outcome] / scale
            base -= height
            parts.append(
                f'<rect class="{css}" x="{x + 0.5:.1f}" y="{base:.1f}" '
                f'width="{max(bar_w - 1, 1):.1f}" height="{height:.1f}"/>'
            )
    for minutes_ago, anchor in ((60, "start"), (30, "middle"), (0, "end")):
        x = LEFT + plot_w * (1 - minutes_ago / MINUTES)
        label = "now" if minutes_ago == 0 else f"-{minutes_ago} min"
        parts.append(
            f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="{anchor}">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
