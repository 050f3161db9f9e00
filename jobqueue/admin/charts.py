"""Internal: the dashboard's charts, drawn on the server as inline SVG (no JavaScript).

For the last hour (a point per minute) or the last 24 hours (a point per 15 minutes): throughput
(succeeded and failed jobs per minute), ready depth and lag per queue, and pickup latency p50/p95,
all read from the per-minute rollup (:func:`jobqueue.ops.rollup.chart_data`). Each chart is an
``<svg role="img">`` with a title, a description, labelled axes with units and a legend; a span
without rollup rows says "no data yet". Each series is one ``<path>`` whose ``data-series`` and
``data-points`` name it and count its points (tests read them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from jobqueue.ops.rollup import ChartData, Series, chart_data

#: ``?span=`` value -> (label, seconds shown, seconds per point, seconds between x ticks).
SPANS: dict[str, tuple[str, int, int, int]] = {
    "1h": ("last hour", 3600, 60, 600),
    "24h": ("last 24 hours", 86400, 900, 4 * 3600),
}
DEFAULT_SPAN = "1h"
#: Series colours, in order (failed is always red).
PALETTE = ("#2b6cb0", "#2f855a", "#b7791f", "#6b46c1", "#319795", "#d53f8c", "#4a5568", "#9c4221")
#: The failed line's colour, used for nothing else.
FAILED_RED = "#c53030"
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 44


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart as the template shows it: its id, title, and the SVG markup."""

    id: str
    title: str
    svg: SafeString


def _nice_top(value: float) -> float:
    """Return a round axis top at or above ``value`` (1, 2, 2.5 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if power * factor >= value:
            return power * factor
    return power * 10


def _n(value: float) -> str:
    # Coordinates to a tenth of a pixel (format_html escapes its arguments to strings first).
    return f"{value:.1f}"


def _label(value: float) -> str:
    return f"{value:g}"


def svg_chart(
    chart_id: str,
    title: str,
    description: str,
    y_label: str,
    series: Sequence[Series],
    data: ChartData,
    tick_s: int,
    colour: Callable[[int, Series], str] | None = None,
) -> Chart:
    """Return one line chart of ``series`` over ``data``'s span, as an accessible SVG.

    Args:
        chart_id: the element id prefix (unique on the page).
        title: the chart's title (also the SVG's ``<title>``).
        description: the SVG's ``<desc>``: what is drawn, in words.
        y_label: the y axis label, with its unit.
        series: the lines; a None value leaves a gap.
        data: the span (start, end, step).
        tick_s: seconds between labelled x ticks.
        colour: ``(index, series) -> CSS colour``; default :data:`PALETTE` by index.
    """
    values = [v for s in series for _, v in s.points if v is not None]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    span_s = (data.end - data.start).total_seconds()
    parts: list[str] = []
    if not values:
        parts.append(
            format_html(
                '<text class="jq-chart-empty" x="{}" y="{}" text-anchor="middle">'
                "no data yet</text>",
                LEFT + plot_w / 2,
                TOP + plot_h / 2,
            )
        )
    top = _nice_top(max(values, default=0.0))

    def x_of(at: datetime) -> float:
        # A point sits in the middle of its step.
        mid = (at - data.start).total_seconds() + data.step_s / 2
        return LEFT + plot_w * mid / span_s

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    for i in range(5):
        grid = top * i / 4
        y = y_of(grid)
        parts.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>'
                '<text x="{}" y="{}" text-anchor="end" font-size="11">{}</text>',
                LEFT,
                LEFT + plot_w,
                _n(y),
                _n(y),
                LEFT - 6,
                _n(y + 4),
                _label(grid),
            )
        )
    tick = data.start
    while tick <= data.end:
        x = LEFT + plot_w * (tick - data.start).total_seconds() / span_s
        parts.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#999"/>'
                '<text x="{}" y="{}" text-anchor="middle" font-size="11">{}</text>',
                _n(x),
                _n(x),
                TOP + plot_h,
                TOP + plot_h + 4,
                _n(x),
                TOP + plot_h + 16,
                timezone.localtime(tick).strftime("%H:%M"),
            )
        )
        tick += timedelta(seconds=tick_s)
    zone = timezone.localtime(data.end).strftime("%Z") or "local time"
    parts.append(
        format_html(
            '<text x="{}" y="{}" text-anchor="middle" font-size="12">time ({})</text>'
            '<text transform="translate(14 {}) rotate(-90)" text-anchor="middle" '
            'font-size="12">{}</text>',
            LEFT + plot_w / 2,
            HEIGHT - 6,
            zone,
            TOP + plot_h / 2,
            y_label,
        )
    )
    legend = []
    for index, line in enumerate(series):
        stroke = colour(index, line) if colour else PALETTE[index % len(PALETTE)]
        moves, dots, pen = [], [], "M"
        for at, point in line.points:
            if point is None:
                pen = "M"
                continue
            moves.append(f"{pen}{x_of(at):.1f},{y_of(point):.1f}")
            # A dot per point: a point between two gaps has no line to show it.
            dots.append((_n(x_of(at)), _n(y_of(point)), stroke))
            pen = "L"
        parts.append(
            format_html(
                '<path class="jq-series" data-series="{}" data-points="{}" d="{}" fill="none" '
                'stroke="{}" stroke-width="2"><title>{}</title></path>',
                line.name,
                len(moves),
                " ".join(moves) or "M0,0",
                stroke,
                line.name,
            )
        )
        parts.append(format_html_join("", '<circle cx="{}" cy="{}" r="2.5" fill="{}"/>', dots))
        legend.append((stroke, line.name))
    svg = format_html(
        '<svg class="jq-chart-svg" role="img" aria-labelledby="{0}-title {0}-desc" '
        'viewBox="0 0 {1} {2}" width="100%" style="max-width:{1}px">'
        '<title id="{0}-title">{3}</title><desc id="{0}-desc">{4}</desc>{5}</svg>'
        '<ul class="jq-legend">{6}</ul>',
        chart_id,
        WIDTH,
        HEIGHT,
        title,
        description,
        # Safe: every part was built by format_html, which escaped its values.
        mark_safe("".join(parts)),
        format_html_join(
            "",
            '<li><span class="jq-swatch" style="background:{}"></span>{}</li>',
            legend,
        ),
    )
    return Chart(id=chart_id, title=title, svg=svg)


def charts(span: str, now: datetime | None = None, using: str = "default") -> dict[str, object]:
    """Return the template context of the charts for ``span`` (``"1h"`` or ``"24h"``).

    An unknown span falls back to the last hour. Keys: ``span``, ``span_label``, ``spans``
    (key, label),
    ``charts`` (:class:`Chart` in page order) and ``using`` (the database alias they read).
    """
    if span not in SPANS:
        span = DEFAULT_SPAN
    label, span_s, step_s, tick_s = SPANS[span]
    data = chart_data(now or timezone.now(), span_s, step_s, using)
    per = "per minute" if step_s == 60 else f"per {step_s // 60} minutes"
    drawn = [
        svg_chart(
            "jq-chart-throughput",
            f"Throughput, {label}",
            f"Succeeded and failed (retried or dead) jobs per minute, one point {per}.",
            "jobs per minute",
            data.throughput if not data.empty else [],
            data,
            tick_s,
            colour=lambda i, s: FAILED_RED if s.name == "failed" else PALETTE[0],
        ),
        svg_chart(
            "jq-chart-depth",
            f"Queue depth, {label}",
            f"Jobs claimable now in each queue, sampled once a minute, one point {per}.",
            "ready jobs",
            data.depth,
            data,
            tick_s,
        ),
        svg_chart(
            "jq-chart-lag",
            f"Queue lag, {label}",
            f"Age of each queue's oldest claimable job, sampled once a minute, one point {per}.",
            "lag (seconds)",
            data.lag,
            data,
            tick_s,
        ),
        svg_chart(
            "jq-chart-pickup",
            f"Pickup latency, {label}",
            "Seconds from a job's run_at to its claim, median (p50) and 95th percentile (p95) "
            f"of the runs recorded, one point {per}.",
            "latency (seconds)",
            data.pickup,
            data,
            tick_s,
        ),
    ]
    return {
        "span": span,
        "span_label": label,
        "spans": [(key, value[0]) for key, value in SPANS.items()],
        "charts": drawn,
        "using": using,
    }
