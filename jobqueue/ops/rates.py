"""Internal: the Prometheus counters and histograms read from the per-minute rollup.

``jobqueue.metrics.compute`` adds them to the shared reading. They are real counters: totals
that only grow, so ``rate()``/``increase()`` work over any window the operator picks, and
``histogram_quantile(0.95, rate(jobqueue_run_duration_seconds_bucket[5m]))`` gives a p95.

The rollup keeps minutes and the pruner deletes old ones, so a sum over the rollup would fall
at each prune and read as a counter reset. Instead the totals are carried forward in a
checkpoint (a :class:`~jobqueue.models.GaugeSnapshot` row named :data:`CHECKPOINT`: the totals
of every minute before ``computed_at``, as JSON): a reading is the checkpoint plus the minutes
since, and each reading folds the minutes older than :data:`SETTLE_MINUTES` into it (a
compare-and-set on ``computed_at``: two processes folding at once both read consistent totals,
one writes). The cost of a reading follows the minutes since the last one, never the rollup's
retention. The first reading starts the counters :data:`WINDOW_MINUTES` minutes back.

One aggregate over a range of the rollup's key per read (``jobqueue/ops/rollup.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction

from jobqueue.models import GaugeSnapshot
from jobqueue.models.metrics import BUCKETS, HISTOGRAMS, bucket_columns
from jobqueue.ops.queues import OTHER_QUEUES_LABEL, top_queues
from jobqueue.ops.rollup import COUNTS, HISTOGRAM_COLUMNS, minute_of, window_totals
from jobqueue.store.failures import classify

__all__ = [
    "CHECKPOINT",
    "SETTLE_MINUTES",
    "WINDOW_MINUTES",
    "Family",
    "families",
    "summarised",
    "totals",
]

#: Minutes the first reading starts its counters back from.
WINDOW_MINUTES = 5
#: Minutes older than this are final (no finishing transaction still adds to them): folded.
SETTLE_MINUTES = 2
#: The :class:`~jobqueue.models.GaugeSnapshot` row holding the counters' checkpoint.
CHECKPOINT = "counters"

#: The columns each (queue, type) total carries.
TOTAL_COLUMNS: tuple[str, ...] = (*COUNTS, "expired", *HISTOGRAM_COLUMNS)

Sample = tuple[dict[str, str], float]

_HISTOGRAMS = {
    "pickup": (
        "jobqueue_pickup_latency_seconds",
        "Seconds from a job's run_at to its claim, by queue and type.",
    ),
    "run": (
        "jobqueue_run_duration_seconds",
        "Seconds from a job's claim to its recorded outcome, by queue and type.",
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """One metric family for ``jobqueue.metrics``: a counter, or a histogram.

    A counter has ``samples``; a histogram has ``series``: per label set, its cumulative
    ``(le, count)`` buckets (``+Inf`` last), its sum and its count.
    """

    name: str
    help: str
    kind: str
    samples: list[Sample] = field(default_factory=list)
    series: list[tuple[dict[str, str], list[tuple[str, float]], float, float]] = field(
        default_factory=list
    )


def _key(row: dict[str, Any]) -> str:
    return json.dumps([row["queue"], row["type"]])


def _add(into: dict[str, dict[str, float]], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        mine = into.setdefault(_key(row), dict.fromkeys(TOTAL_COLUMNS, 0.0))
        for column in TOTAL_COLUMNS:
            mine[column] = mine.get(column, 0.0) + float(row.get(column) or 0)


def _write(using: str, write: Callable[[], object]) -> None:
    """Run one write of the checkpoint; on a read-only database, leave it for a later reading.

    The totals of this reading are right either way (they are computed, then kept); a database
    that turned read-only (a failover) must still be scraped, and its gauge say so (issue 32).
    """
    try:
        with transaction.atomic(using=using):
            write()
    except DatabaseError as exc:
        if classify(exc, using).kind != "read_only":
            raise


def totals(now: datetime, using: str = "default") -> list[dict[str, Any]]:
    """Return the running totals per (queue, type), folding settled minutes into the checkpoint.

    Args:
        now: the database clock at the reading (aware).
        using: database alias.

    Returns:
        One dict per (queue, type) with ``queue``, ``type`` and every column of
        :data:`TOTAL_COLUMNS`, ordered by queue, type.
    """
    rows = GaugeSnapshot.objects.using(using).filter(name=CHECKPOINT)
    found = rows.values_list("body", "computed_at").first()
    current = minute_of(now)
    base: dict[str, dict[str, float]] = {}
    since = current - timedelta(minutes=WINDOW_MINUTES)
    if found is None:
        _write(
            using,
            lambda: GaugeSnapshot.objects.using(using).bulk_create(
                [GaugeSnapshot(name=CHECKPOINT)], ignore_conflicts=True
            ),
        )
        held_since = None
    else:
        body, held_since = found
        if held_since is not None:
            base = json.loads(body or "{}")
            since = held_since
    settle = current - timedelta(minutes=SETTLE_MINUTES)
    if settle > since:
        _add(base, window_totals(since, settle, using))
        # Compare-and-set: another reading may have folded meanwhile (its totals agree).
        guard = (
            rows.filter(computed_at=held_since)
            if held_since is not None
            else rows.filter(computed_at__isnull=True)
        )
        body_json = json.dumps(base, separators=(",", ":"))
        _write(using, lambda: guard.update(body=body_json, computed_at=settle))
        since = settle
    running = {key: dict(values) for key, values in base.items()}
    _add(running, window_totals(since, current + timedelta(minutes=1), using))
    out = []
    for key in sorted(running):
        queue, job_type = json.loads(key)
        out.append({"queue": queue, "type": job_type, **running[key]})
    return out


def summarised(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``rows`` with the queues past the busiest TOP_QUEUES summed per type (issue 33).

    Each (queue, type) row is some forty series (outcomes, histogram buckets): at 10,000 queues
    that would be 400,000 samples. The queues with the most runs keep their rows; the rest are
    added up per type under ``queue="_other"`` (counts, bucket counts and sums all add).

    Args:
        rows: :func:`totals` rows.
    """
    runs: dict[str, float] = {}
    for row in rows:
        runs[row["queue"]] = runs.get(row["queue"], 0) + sum(row[c] or 0 for c in COUNTS)
    shown, rest = top_queues(runs, runs, {})
    if not rest:
        return rows
    keep = set(shown)
    out = [row for row in rows if row["queue"] in keep]
    other: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["queue"] in keep:
            continue
        into = other.setdefault(row["type"], {"queue": OTHER_QUEUES_LABEL, "type": row["type"]})
        for column, value in row.items():
            if column not in ("queue", "type"):
                into[column] = into.get(column, 0) + (value or 0)
    return out + [other[t] for t in sorted(other)]


def _le(bound: float) -> str:
    return f"{bound:g}"


def families(
    now: datetime, using: str = "default", counted: list[dict[str, Any]] | None = None
) -> list[Family]:
    """Return the counters and histograms of the rollup, for ``metrics.compute``.

    Args:
        now: the database clock at the reading (aware).
        using: database alias.
        counted: this reading's :func:`totals`, when the caller read them already
            (``metrics.compute`` also reads their queues: a queue that ran jobs keeps its
            gauges when it goes idle); None: read them here.
    """
    rows = summarised(totals(now, using) if counted is None else counted)
    runs: list[Sample] = []
    expirations: dict[str, float] = {}
    for row in rows:
        key = {"queue": row["queue"], "type": row["type"]}
        runs += [({**key, "outcome": c}, float(row[c])) for c in COUNTS]
        expirations[row["queue"]] = expirations.get(row["queue"], 0.0) + row["expired"]
    out = [
        Family(
            name="jobqueue_job_runs_total",
            help="Runs recorded, by queue, type and outcome (succeeded; retried: failed, will "
            "run again; dead; cancelled). rate() of it is the throughput; outcome=retried "
            "counts the retries.",
            kind="counter",
            samples=runs,
        ),
        Family(
            name="jobqueue_lease_expirations_total",
            help="Runs whose lease ran out (ended by the reaper: retried or dead), by queue.",
            kind="counter",
            samples=[({"queue": q}, n) for q, n in sorted(expirations.items())],
        ),
    ]
    for histogram in HISTOGRAMS:
        name, text = _HISTOGRAMS[histogram]
        series = []
        for row in rows:
            buckets = [
                (_le(bound), float(row[column]))
                for column, bound in zip(bucket_columns(histogram), BUCKETS, strict=True)
            ]
            count = float(row[f"{histogram}_count"])
            buckets.append(("+Inf", count))
            labels = {"queue": row["queue"], "type": row["type"]}
            series.append((labels, buckets, float(row[f"{histogram}_sum_s"]), count))
        out.append(Family(name=name, help=text, kind="histogram", series=series))
    return out
