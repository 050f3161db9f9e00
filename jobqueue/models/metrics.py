"""The metric tables: gauge snapshots and rollups.

Gauge snapshots sample the queue's depth; rollups count outcomes and run durations per minute,
per queue and job type.
"""

from __future__ import annotations

from django.db import models

#: The ``name`` of the row that records the last prune
#: (``jobqueue.maintenance.pruning.record_prune``).
LAST_PRUNE = "last_prune"
#: The ``name`` prefix of the rows that count worker process deaths by cause, e.g.
#: ``"deaths:SIGKILL"`` (``jobqueue.worker.deaths.count_death``; ``body`` the count as text).
DEATHS_PREFIX = "deaths:"
#: The ``name`` of the row counting worker recycles, its ``body`` the count as text
#: (``jobqueue.maintenance.pruning.record_recycle``).
RECYCLES = "recycles"
#: Why a worker process recycled: a handler overran its timeout and kept its thread, the
#: worker finished ``--max-tasks`` jobs, or its resident memory passed
#: ``--max-memory-per-child``.
RECYCLE_REASONS = ("overrun", "max_tasks", "memory")


#: The ``name`` prefixes of the rows counting event-loop stalls per job type (``body`` the count)
#: and their length in milliseconds (``jobqueue.maintenance.pruning.record_loop_stalls``).
LOOP_STALLS_PREFIX = "loop_stalls:"
LOOP_STALL_MS_PREFIX = "loop_stall_ms:"


class GaugeSnapshot(models.Model):
    """The latest cluster-wide gauge reading in the Prometheus text format."""

    name = models.CharField(max_length=100, unique=True)
    body = models.TextField(blank=True, default="")
    #: When ``body`` was computed (database clock); None before the first reading.
    computed_at = models.DateTimeField(null=True, blank=True)
    #: A process recomputes it until then; another may take over after (it died meanwhile).
    computing_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "gauge snapshot"

    def __str__(self) -> str:
        return self.name


#: Upper bounds (seconds) of the histogram buckets, both histograms; ``+Inf`` is the count.
BUCKETS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Slots a (minute, queue, type) is split over, so concurrent finishers lock different rows.
#: Readers sum over them; at most this many rows per key and minute (16 x the unsharded rows).
ROLLUP_SHARDS = 16
#: The ``kind`` of the error entry the reaper writes for a lease that ran out (``expired``).
EXPIRED_KIND = "lease_expired"
#: Histogram column prefixes: seconds from ``run_at`` to claim, and from claim to outcome.
HISTOGRAMS: tuple[str, ...] = ("pickup", "run")
#: Outcome count columns, by the state each run was recorded in (``retried``: ``scheduled``).
OUTCOMES: dict[str, str] = {
    "succeeded": "succeeded",
    "scheduled": "retried",
    "dead": "dead",
    "cancelled": "cancelled",
}


def bucket_columns(histogram: str) -> list[str]:
    """Return the ``le`` bucket column names of ``histogram`` (``"pickup"`` or ``"run"``)."""
    return [f"{histogram}_le_{i:02d}" for i in range(len(BUCKETS))]


def _counter(help_text: str = "") -> models.BigIntegerField:
    # A database default too: sample_depth.sql inserts a row naming none of the counters.
    return models.BigIntegerField(default=0, db_default=0, help_text=help_text)


class Rollup(models.Model):
    """Outcomes of one queue and job type in one minute (or, with type "", its depth sample)."""

    minute = models.DateTimeField(help_text="Start of the minute (database clock).")
    queue = models.CharField(max_length=100)
    type = models.CharField("job type", max_length=200, blank=True, default="")
    shard = models.SmallIntegerField(
        default=0, db_default=0, help_text=f"Writer's slot, 0..{ROLLUP_SHARDS - 1}; sum over it."
    )
    succeeded = _counter()
    retried = _counter("Failed runs that will run again.")
    dead = _counter()
    cancelled = _counter()
    expired = _counter("Runs the reaper ended: their lease ran out (retried or dead too).")
    pickup_count = _counter()
    pickup_sum_s = models.FloatField(default=0.0, db_default=0.0)
    run_count = _counter()
    run_sum_s = models.FloatField(default=0.0, db_default=0.0)
    ready = models.BigIntegerField(null=True, blank=True, help_text="Claimable jobs, sampled.")
    lag_s = models.FloatField(null=True, blank=True, help_text="Oldest claimable age, sampled.")

    class Meta:
        verbose_name = "rollup"
        constraints = [
            models.UniqueConstraint(
                fields=("minute", "queue", "type", "shard"), name="jobqueue_rollup_key"
            )
        ]


for _histogram in HISTOGRAMS:
    for _column, _le in zip(bucket_columns(_histogram), BUCKETS, strict=True):
        _counter(f"Runs with {_histogram} <= {_le} s.").contribute_to_class(Rollup, _column)
