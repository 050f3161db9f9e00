"""Internal: the dashboard's charts, drawn on the server as inline SVG.

For the last hour (a point per minute) or the last 24 hours (a point per 15 minutes): throughput
(succeeded and failed jobs per minute), ready depth and lag per queue, and pickup latency p50/p95,
all read from the per-minute rollup (:func:`jobqueue.ops.rollup.chart_data`). Each chart is an
``<svg role="img">`` with a title, a description, labelled axes with units and a legend; a span
without rollup rows says "no data yet". Each series is one ``<path>`` whose ``data-series`` and
``data-points`` name it and count its points (tests read them).

Readable: the y axis is cut in at most :data:`MAX_Y_TICKS` steps of 1, 2 or 5 times a power of
ten (0, 5, 10, 15, 20; never 6.25 or 18.75), the series take colours that stay apart for the
colour-blind too (Okabe and Ito's palette; failed is red and nothing else), the second line of a
chart is dashed, and each step of the x axis is a hover band (``rect.jq-hover``) whose
``data-tip`` names its time and every series' value there: ``admin/jobqueue/dashboard.js`` shows
it beside the pointer, and its ``<title>`` is the browser's own tooltip without JavaScript.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from jobqueue.ops.clock import db_now
from jobqueue.ops.rollup import ChartData, Series, chart_data

#: ``?span=`` value -> (label, seconds shown, seconds per point, seconds between x ticks).
SPANS: dict[str, tuple[str, int, int, int]] = {
    "1h": ("last hour", 3600, 60, 600),
    "24h": ("last 24 hours", 86400, 900, 4 * 3600),
}
DEFAULT_SPAN = "1h"
#: Series colours, in order (failed is always red): Okabe and Ito's colour-blind-safe palette,
#: without its vermillion (too near the failed red) and yellow (unreadable on white).
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#6a3d9a", "#4d4d4d", "#8c564b")
#: Dash patterns by series index: a second line sharing the plot reads apart in grey print too.
DASHES = ("", "6 3", "2 2", "8 3 2 3")
#: Most steps on the y axis (a round step: 1, 2 or 5 times a power of ten).
MAX_Y_TICKS = 5
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


def y_ticks(value: float) -> list[float]:
    """Return the y axis' ticks from 0 to at or above ``value``: round, evenly spaced.

    The step is 1, 2 or 5 times a power of ten, the smallest that needs at most
    :data:`MAX_Y_TICKS` steps: 23 -> 0, 5, 10, 15, 20, 25; 0.3 -> 0, 0.1, 0.2, 0.3; 0 -> 0, 1.

    Args:
        value: the largest value drawn (>= 0).
    """
    if value <= 0:
        return [0.0, 1.0]
    step = 0.0
    power = 10.0 ** math.floor(math.log10(value / MAX_Y_TICKS))
    for factor in (1, 2, 5, 10):
        step = power * factor
        if math.ceil(value / step - 1e-9) <= MAX_Y_TICKS:
            break
    count = max(math.ceil(value / step - 1e-9), 1)
    # round(): 0.1 * 3 is 0.30000000000000004, which would print as such.
    return [round(step * i, 12) for i in range(count + 1)]


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
    ticks = y_ticks(max(values, default=0.0))
    top = ticks[-1]

    def x_of(at: datetime) -> float:
        # A point sits in the middle of its step.
        mid = (at - data.start).total_seconds() + data.step_s / 2
        return LEFT + plot_w * mid / span_s

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    for grid in ticks:
        y = y_of(grid)
        parts.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>'
                '<text x="{}" y="{}" text-anchor="end" font-size="12">{}</text>',
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
                '<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>',
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
    parts.extend(hover_bands(series, data, y_label, x_of, TOP, plot_h))
    legend = []
    for index, line in enumerate(series):
        stroke = colour(index, line) if colour else PALETTE[index % len(PALETTE)]
        dash = DASHES[index % len(DASHES)]
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
                'stroke="{}" stroke-width="2" stroke-dasharray="{}"><title>{}</title></path>',
                line.name,
                len(moves),
                " ".join(moves) or "M0,0",
                stroke,
                dash or "none",
                line.name,
            )
        )
        parts.append(format_html_join("", '<circle cx="{}" cy="{}" r="2.5" fill="{}"/>', dots))
        legend.append(("dashed" if dash else "solid", stroke, line.name))
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
            '<li><span class="jq-swatch" style="border-top: 3px {} {}"></span>{}</li>',
            legend,
        ),
    )
    return Chart(id=chart_id, title=title, svg=svg)


def _value(value: float | None) -> str:
    return "no data" if value is None else f"{value:.3g}"


def hover_bands(
    series: Sequence[Series],
    data: ChartData,
    y_label: str,
    x_of: Callable[[datetime], float],
    top: float,
    height: float,
) -> list[SafeString]:
    """Return one transparent ``rect.jq-hover`` per step: its time and each series' value.

    ``data-tip`` is ``"14:05:00 UTC · succeeded 12 · failed 1 (jobs per minute)"``; the band
    covers the step's width of the plot, so the pointer anywhere above a time finds it.
    """
    if not series:
        return []
    width = (WIDTH - LEFT - RIGHT) * data.step_s / (data.end - data.start).total_seconds()
    bands = []
    for i, (at, _) in enumerate(series[0].points):
        values = " · ".join(f"{line.name} {_value(line.points[i][1])}" for line in series)
        tip = f"{timezone.localtime(at).strftime('%H:%M:%S %Z')} · {values} ({y_label})"
        bands.append(
            format_html(
                '<rect class="jq-hover" x="{}" y="{}" width="{}" height="{}" fill="transparent" '
                'data-tip="{}"><title>{}</title></rect>',
                _n(x_of(at) - width / 2),
                top,
                _n(width),
                height,
                tip,
                tip,
            )
        )
    return bands


def charts(span: str, now: datetime | None = None, using: str = "default") -> dict[str, object]:
    """Return the template context of the charts for ``span`` (``"1h"`` or ``"24h"``).

    An unknown span falls back to the last hour. Keys: ``span``, ``span_label``, ``spans``
    (key, label), ``charts`` (:class:`Chart` in page order) and ``using`` (the database alias
    they read).

    Args:
        span: a key of :data:`SPANS`.
        now: the end of the span (aware); default the database's time: the rollup's minutes
            are the database clock's, and this host's may be off (issue 32).
        using: database alias.

    Raises:
        django.db.Error: the database cannot be reached.
    """
    if span not in SPANS:
        span = DEFAULT_SPAN
    label, span_s, step_s, tick_s = SPANS[span]
    data = chart_data(now or db_now(using), span_s, step_s, using)
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
