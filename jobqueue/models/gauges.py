"""Internal: the ``GaugeSnapshot`` model (the metrics' cluster-wide reading), beside ``models.py``.

Import it from :mod:`jobqueue.models`. One row per reading (``name``): the metrics endpoint serves
its text to every scrape of every process, and one process at a time recomputes it once it is
older than the interval (a compare-and-set on ``computing_until``), so the gauges are computed
once per interval for the whole cluster however many processes are scraped (FIELD-CASES 30).

The row named :data:`LAST_PRUNE` is the pruner's note instead: ``body`` the last prune's
duration in seconds (as text), ``computed_at`` when it ended (FIELD-CASES 31's gauge).
"""

from __future__ import annotations

from django.db import models

#: The ``name`` of the row that records the last prune
#: (``jobqueue.maintenance.pruning.record_prune``).
LAST_PRUNE = "last_prune"


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
