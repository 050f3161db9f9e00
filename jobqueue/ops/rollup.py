"""Internal: the per-minute rollup read for people and scrapers: rates, histograms, chart series.

Every read is one aggregate over a range of ``minute``, which leads the rollup's unique key
(``jobqueue_rollup_key``: minute, queue, type, shard), so its cost follows the rows of the window
(its minutes times the queue/type pairs that ran in them times the shards written), never the
jobs table. Every read sums (or, for depth samples, takes the largest) over ``shard``: one
(minute, queue, type) may be split over up to ``ROLLUP_SHARDS`` rows. Rows with ``type`` ""
are the depth samples; rows with a type, outcomes (``jobqueue/models/metrics.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Sum

from jobqueue.models import Rollup
from jobqueue.models.metrics import BUCKETS, HISTOGRAMS, OUTCOMES, bucket_columns
from jobqueue.store import get_store

#: Outcome count columns, in the order they are shown.
COUNTS: tuple[str, ...] = tuple(OUTCOMES.values())
#: Columns summed for a histogram: its ``le`` buckets, count and sum.
HISTOGRAM_COLUMNS: tuple[str, ...] = tuple(
    column
    for histogram in HISTOGRAMS
    for column in (*bucket_columns(histogram), f"{histogram}_count", f"{histogram}_sum_s")
)
#: Most queues drawn in the depth and lag charts (the deepest at any time of the span).
CHART_QUEUES = 8


def minute_of(at: datetime) -> datetime:
    """Return the start of ``at``'s minute (the rollup's key)."""
    return at.replace(second=0, microsecond=0)


def _sums(columns: Sequence[str]) -> dict[str, Any]:
    return {c: Sum(c) for c in columns}


def window_totals(start: datetime, end: datetime, using: str = "default") -> list[dict[str, Any]]:
    """Return the outcome counts and histograms of minutes ``[start, end)``, per queue and type.

    Args:
        start: first minute included (aware).
        end: first minute excluded (aware).
        using: database alias.

    Returns:
        One dict per (queue, type) with ``queue``, ``type``, every count (and ``expired``) and
        histogram column summed over minutes and shards (histogram buckets stay cumulative
        ``le`` counts), ordered by queue, type.
    """
    rows = (
        Rollup.objects.using(using)
        .filter(minute__gte=start, minute__lt=end)
        .exclude(type="")
        .values("queue", "type")
        .annotate(**_sums((*COUNTS, "expired", *HISTOGRAM_COLUMNS)))
        .order_by("queue", "type")
    )
    totals: list[dict[str, Any]] = list(rows)  # type: ignore[arg-type]  # annotated columns
    return totals


def quantile(q: float, buckets: Sequence[float], count: float) -> float | None:
    """Return the ``q`` quantile of a histogram, as Prometheus' ``histogram_quantile`` does.

    Linear interpolation inside the bucket the rank falls in; a rank above the last finite
    bucket answers that bucket's bound (the +Inf bucket has no upper edge).

    Args:
        q: the quantile, 0..1.
        buckets: cumulative counts of :data:`~jobqueue.models.metrics.BUCKETS`, in order.
        count: observations in all (the +Inf bucket).

    Returns:
        Seconds, or None when the histogram is empty.
    """
    if count <= 0:
        return None
    rank = q * count
    below, lower = 0.0, 0.0
    for le, cumulative in zip(BUCKETS, buckets, strict=True):
        if cumulative >= rank:
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        below, lower = float(cumulative), le
    return BUCKETS[-1]


#: The per-type table's windows: ``?types=`` value -> (label, seconds).
TYPE_WINDOWS: dict[str, tuple[str, int]] = {
    "1h": ("last hour", 3600),
    "24h": ("last 24 hours", 86400),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeRow:
    """One job type's line in the dashboard's per-type table."""

    type: str
    runs: int
    failures: int
    dead: int
    #: Failed runs / runs, 0..1 (None: no runs).
    failure_rate: float | None
    #: Run duration quantiles (seconds) from the summed histogram; None: no timed run.
    p50_s: float | None
    p95_s: float | None
    #: Mean run duration (seconds), the histogram's sum / count.
    mean_s: float | None


def type_table(now: datetime, window_s: int, using: str = "default") -> list[TypeRow]:
    """Return each job type's runs, failures and p50/p95 run duration over the last ``window_s``.

    Read from the per-minute rollup through the store (``type_totals``): the minutes from
    ``window_s`` before ``now``'s minute up to and including it. Quantiles are read off the
    summed run histogram the way Prometheus' ``histogram_quantile`` does (:func:`quantile`),
    so they are as exact as its buckets (:data:`~jobqueue.models.metrics.BUCKETS`).

    Args:
        now: the end of the window (aware; the database clock).
        window_s: seconds, a multiple of 60.
        using: database alias.

    Returns:
        Rows, the types with the most failures first, then the most runs, then by name.
    """
    end = minute_of(now) + timedelta(minutes=1)
    rows = []
    for t in get_store(using).type_totals(end - timedelta(seconds=window_s), end):
        rows.append(
            TypeRow(
                type=t.type,
                runs=t.runs,
                failures=t.failures,
                dead=t.dead,
                failure_rate=t.failures / t.runs if t.runs else None,
                p50_s=quantile(0.5, t.run_buckets, t.run_count),
                p95_s=quantile(0.95, t.run_buckets, t.run_count),
                mean_s=t.run_sum_s / t.run_count if t.run_count else None,
            )
        )
    return sorted(rows, key=lambda r: (-r.failures, -r.runs, r.type))


@dataclass
class Series:
    """One line of a chart: a name and ``(minute, value)`` points (None: no value there)."""

    name: str
    points: list[tuple[datetime, float | None]] = field(default_factory=list)


#: The series drawn for depth and lag when no queue had anything claimable in the span.
ALL_QUEUES = "all queues"


@dataclass
class ChartData:
    """What the dashboard's charts draw for one span, every series on the same minutes."""

    start: datetime
    end: datetime
    step_s: int
    throughput: list[Series]
    depth: list[Series]
    lag: list[Series]
    pickup: list[Series]

    @property
    def empty(self) -> bool:
        """Return whether the span has no rollup row at all ("no data yet")."""
        return not any(p[1] for s in self.throughput + self.depth for p in s.points) and not any(
            p[1] is not None for s in self.pickup + self.lag for p in s.points
        )


def chart_data(now: datetime, span_s: int, step_s: int, using: str = "default") -> ChartData:
    """Return the dashboard's series for the ``span_s`` seconds up to ``now``, per ``step_s``.

    Throughput is jobs per minute (the step's average), failed = retried + dead; depth and lag
    are each queue's sample (the step's largest); pickup latency p50/p95 are read from the
    step's summed histogram (all queues).

    Args:
        now: the end of the span (aware).
        span_s: seconds shown, a multiple of ``step_s``.
        step_s: seconds per point, a multiple of 60.
        using: database alias.
    """
    end = minute_of(now) + timedelta(minutes=1)
    start = end - timedelta(seconds=span_s)
    steps = [start + timedelta(seconds=i * step_s) for i in range(span_s // step_s)]
    per_step = step_s // 60
    rows = Rollup.objects.using(using).filter(minute__gte=start, minute__lt=end)

    def step_of(minute: datetime) -> datetime:
        return steps[int((minute - start).total_seconds()) // step_s]

    outcome = {s: {c: 0.0 for c in ("succeeded", "failed", "count")} for s in steps}
    buckets = {s: [0.0] * len(BUCKETS) for s in steps}
    pickup = bucket_columns("pickup")
    # Any: django-stubs types values() rows, not the columns annotate(**sums) adds.
    done: Any = (
        rows.exclude(type="")
        .values("minute")
        .annotate(**_sums(("succeeded", "retried", "dead", "pickup_count", *pickup)))
    )
    for r in done:
        at = step_of(r["minute"])
        outcome[at]["succeeded"] += r["succeeded"]
        outcome[at]["failed"] += r["retried"] + r["dead"]
        outcome[at]["count"] += r["pickup_count"]
        buckets[at] = [b + r[c] for b, c in zip(buckets[at], pickup, strict=True)]
    depth: dict[str, dict[datetime, float]] = {}
    lag: dict[str, dict[datetime, float]] = {}
    sampled: set[datetime] = set()
    # The minute's totals: drawn when no queue had anything claimable, so a quiet cluster
    # shows a flat zero line, not "no data yet".
    total: dict[str, dict[datetime, float]] = {ALL_QUEUES: {}}
    total_lag: dict[str, dict[datetime, float]] = {ALL_QUEUES: {}}
    samples = (
        rows.filter(type="")
        .values("minute", "queue")
        .annotate(ready=Max("ready"), lag_s=Max("lag_s"))
    )
    for r in samples:
        at = step_of(r["minute"])
        if r["queue"] == "":
            # The minute's marker: sampled, so a queue without a row had nothing claimable.
            sampled.add(at)
            mine = total[ALL_QUEUES]
            mine[at] = max(mine.get(at, 0.0), float(r["ready"] or 0))
            late = total_lag[ALL_QUEUES]
            late[at] = max(late.get(at, 0.0), float(r["lag_s"] or 0.0))
            continue
        mine = depth.setdefault(r["queue"], {})
        mine[at] = max(mine.get(at, 0.0), float(r["ready"] or 0))
        late = lag.setdefault(r["queue"], {})
        late[at] = max(late.get(at, 0.0), float(r["lag_s"] or 0.0))

    def sampled_series(values: dict[str, dict[datetime, float]], queue: str) -> Series:
        # No sample in a step (no worker ran): a gap, not a zero.
        return Series(
            queue, [(s, values[queue].get(s, 0.0) if s in sampled else None) for s in steps]
        )

    shown = sorted(depth, key=lambda q: (-max(depth[q].values()), q))[:CHART_QUEUES]
    return ChartData(
        start=start,
        end=end,
        step_s=step_s,
        throughput=[
            Series(name, [(s, outcome[s][name] / per_step) for s in steps])
            for name in ("succeeded", "failed")
        ],
        depth=[sampled_series(depth, q) for q in sorted(shown)]
        or ([sampled_series(total, ALL_QUEUES)] if sampled else []),
        lag=[sampled_series(lag, q) for q in sorted(shown)]
        or ([sampled_series(total_lag, ALL_QUEUES)] if sampled else []),
        pickup=[
            Series(
                f"p{round(q * 100)}",
                [(s, quantile(q, buckets[s], outcome[s]["count"])) for s in steps],
            )
            for q in (0.5, 0.95)
        ],
    )
