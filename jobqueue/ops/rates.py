"""Internal: the Prometheus families read from the per-minute rollup: outcome rates, histograms.

``jobqueue.metrics.collect`` adds them to its text. Each is a reading of the last
:data:`WINDOW_MINUTES` complete minutes (the rollup keeps minutes, and prunes them, so a
running total would fall at each prune and read as a counter reset): rates per second by
queue, type and outcome, lease expirations per minute by queue, and the pickup-latency and
run-duration histograms of those minutes as cumulative ``le`` buckets, ``_sum`` and ``_count``.
``histogram_quantile(0.95, jobqueue_pickup_latency_seconds_bucket)`` gives the window's p95
directly (no ``rate()``).
One aggregate over a range of the rollup's key (``jobqueue/ops/rollup.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobqueue.models.metrics import BUCKETS, bucket_columns
from jobqueue.ops.queues import OTHER_QUEUES_LABEL, top_queues
from jobqueue.ops.rollup import COUNTS, minute_of, window_totals

#: Complete minutes each reading covers.
WINDOW_MINUTES = 5

Sample = tuple[dict[str, str], float]
Family = tuple[str, str, list[Sample]]

_HISTOGRAMS = {
    "pickup": (
        "jobqueue_pickup_latency_seconds",
        "Seconds from a job's run_at to its claim, runs recorded in the last "
        f"{WINDOW_MINUTES} complete minutes",
    ),
    "run": (
        "jobqueue_run_duration_seconds",
        "Seconds from claim to recorded outcome, runs recorded in the last "
        f"{WINDOW_MINUTES} complete minutes",
    ),
}


def _le(bound: float) -> str:
    return f"{bound:g}"


def summarised(totals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``totals`` with the queues past the busiest TOP_QUEUES summed per type (issue 33).

    Each (queue, type) row is some forty series (outcomes, histogram buckets): at 10,000 queues
    that would be 400,000 samples. The queues with the most runs keep their rows; the rest are
    added up per type under ``queue="_other"`` (counts, bucket counts and sums all add).

    Args:
        totals: :func:`~jobqueue.ops.rollup.window_totals` rows.
    """
    runs: dict[str, float] = {}
    for row in totals:
        runs[row["queue"]] = runs.get(row["queue"], 0) + sum(row[c] or 0 for c in COUNTS)
    shown, rest = top_queues(runs, runs, {})
    if not rest:
        return totals
    keep = set(shown)
    out = [row for row in totals if row["queue"] in keep]
    other: dict[str, dict[str, Any]] = {}
    for row in totals:
        if row["queue"] in keep:
            continue
        into = other.setdefault(row["type"], {"queue": OTHER_QUEUES_LABEL, "type": row["type"]})
        for column, value in row.items():
            if column not in ("queue", "type"):
                into[column] = into.get(column, 0) + (value or 0)
    return out + [other[t] for t in sorted(other)]


def families(now: datetime, using: str = "default") -> list[Family]:
    """Return ``(name, help, samples)`` for each rollup family, for ``metrics.family``.

    Args:
        now: the database clock at the scrape (aware).
        using: database alias.
    """
    end = minute_of(now)
    start = end - timedelta(minutes=WINDOW_MINUTES)
    seconds = WINDOW_MINUTES * 60.0
    totals = summarised(window_totals(start, end, using))
    rates: list[Sample] = []
    failures: list[Sample] = []
    for row in totals:
        key = {"queue": row["queue"], "type": row["type"]}
        rates += [({**key, "outcome": c}, row[c] / seconds) for c in COUNTS]
        failures.append((key, (row["retried"] + row["dead"]) / seconds))
    expirations: dict[str, float] = {}
    for row in totals:
        expirations[row["queue"]] = expirations.get(row["queue"], 0.0) + row["expired"]
    out: list[Family] = [
        (
            "jobqueue_lease_expirations_per_minute",
            "Runs whose lease ran out (ended by the reaper: retried or dead) per minute, over "
            f"the last {WINDOW_MINUTES} complete minutes, by queue.",
            [({"queue": q}, n / WINDOW_MINUTES) for q, n in sorted(expirations.items())],
        ),
        (
            "jobqueue_job_outcome_rate_per_second",
            f"Runs recorded per second over the last {WINDOW_MINUTES} complete minutes, by "
            "queue, type and outcome (succeeded, retried, dead, cancelled).",
            rates,
        ),
        (
            "jobqueue_job_failure_rate_per_second",
            f"Failed runs (retried + dead) per second over the last {WINDOW_MINUTES} complete "
            "minutes, by queue and type.",
            failures,
        ),
    ]
    for histogram, (name, text) in _HISTOGRAMS.items():
        buckets: list[Sample] = []
        sums: list[Sample] = []
        counts: list[Sample] = []
        for row in totals:
            key = {"queue": row["queue"], "type": row["type"]}
            for column, bound in zip(bucket_columns(histogram), BUCKETS, strict=True):
                buckets.append(({**key, "le": _le(bound)}, float(row[column])))
            buckets.append(({**key, "le": "+Inf"}, float(row[f"{histogram}_count"])))
            sums.append((key, float(row[f"{histogram}_sum_s"])))
            counts.append((key, float(row[f"{histogram}_count"])))
        out += [
            (f"{name}_bucket", f"{text}: cumulative count per upper bound le.", buckets),
            (f"{name}_sum", f"{text}: their sum, seconds.", sums),
            (f"{name}_count", f"{text}: how many.", counts),
        ]
    return out
