"""Internal: the rollup part of the store seam: per-minute outcome counts and depth samples.

One part of the composite :class:`~jobqueue.store.protocol.Store`. Outcomes reach the rollup
inside ``finish_many`` itself (PostgreSQL: the same statement, ``finish_many.sql``; the ORM
store: :func:`tally`, then one upsert per key, ``generic_rollups.py``); this part adds the
once-a-minute depth sample and the pruning. The rows are ``jobqueue.models.Rollup``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from jobqueue.models.metrics import BUCKETS, OUTCOMES, bucket_columns
from jobqueue.store.gauges import QueueGauge

#: Rows deleted per statement by ``prune_rollups``.
PRUNE_ROLLUPS_LIMIT = 10_000

#: One recorded run: (queue, type, recorded state, run_at before the outcome, started_at,
#: whether the reaper ended it because its lease ran out).
Observation = tuple[str, str, str, datetime | None, datetime | None, bool]


def tally(observed: Iterable[Observation], at: datetime) -> dict[tuple[str, str], dict[str, float]]:
    """Return the rollup increments of runs recorded at ``at``, per (queue, type).

    The ORM twin of the ``observed``/``rolled`` part of finish_many.sql: outcome counts by
    recorded state, and per histogram its count, sum (seconds) and cumulative ``le`` counts.
    Pickup is ``started_at - run_at``, run ``at - started_at``, both at least 0; ``expired``
    counts the runs whose lease ran out.
    """
    out: dict[tuple[str, str], dict[str, float]] = {}
    for queue, job_type, state, due_at, started_at, expired in observed:
        row = out.setdefault((queue, job_type), {})
        column = OUTCOMES.get(state)
        if column is not None:
            row[column] = row.get(column, 0) + 1
        if expired:
            row["expired"] = row.get("expired", 0) + 1
        if started_at is None:
            continue
        spans = {"run": max((at - started_at).total_seconds(), 0.0)}
        if due_at is not None:
            spans["pickup"] = max((started_at - due_at).total_seconds(), 0.0)
        for histogram, seconds in spans.items():
            row[f"{histogram}_count"] = row.get(f"{histogram}_count", 0) + 1
            row[f"{histogram}_sum_s"] = row.get(f"{histogram}_sum_s", 0.0) + seconds
            for name, le in zip(bucket_columns(histogram), BUCKETS, strict=True):
                if seconds <= le:
                    row[name] = row.get(name, 0) + 1
    return out


def depth_samples(gauges: Iterable[QueueGauge], at: datetime) -> list[tuple[str, int, float]]:
    """Return the depth sample rows of ``gauges`` read at ``at``: (queue, ready, lag seconds).

    Queues with jobs due now only (a queue of future jobs has no depth); the counts are the
    gauges' capped ones, so a sample reads a bounded part of the claim index however deep a
    queue is (``queue_gauges``).
    """
    return [
        (g.queue, g.ready, max((at - g.oldest_due).total_seconds(), 0.0))
        for g in gauges
        if g.ready and g.oldest_due is not None
    ]


class RollupStore(Protocol):
    """The per-minute rollup's own writes (outcomes are added by ``finish_many``)."""

    def sample_depth(self, now: datetime | None = None) -> int:
        """Record each queue's claimable count and oldest claimable age for this minute.

        The first sample of a minute stands (later calls that minute, from any worker, write
        nothing), so every worker may call it; a row ``(minute, "", "")`` holds the totals.
        Counts are ``queue_gauges``' capped ones (:func:`depth_samples`).

        Args:
            now: stands in for the database clock (tests).

        Returns:
            How many rows were written (0 when this minute was sampled already).
        """

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` rollup rows of minutes older than ``older_than_s`` seconds.

        Returns:
            How many rows were deleted.
        """
