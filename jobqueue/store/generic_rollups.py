"""Internal: the rollup on the ORM. A mixin of :class:`~jobqueue.store.generic.GenericStore`.

``_roll_up`` is called by ``finish_many`` inside its transaction: one read of the batch's
rows before they change (their ``run_at``), then one upsert per (queue, type) of the batch, in
this process's shard (process id mod ``ROLLUP_SHARDS``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Set
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobqueue.models import Job, Rollup
from jobqueue.models.rollups import ROLLUP_SHARDS
from jobqueue.store.interface import PRUNE_ROLLUPS_LIMIT, Observation
from jobqueue.store.shared import depth_samples, tally


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


class GenericRollupStore:
    """sample_depth, prune_rollups and the outcome upsert on the ORM; the host gives ``alias``."""

    alias: str
    queue_gauges: Any

    def _before(self, ids: Iterable[int]) -> dict[int, tuple[str, str, datetime, datetime | None]]:
        """Return ``{id: (queue, type, run_at, started_at)}`` of rows about to be finished."""
        rows = Job.objects.using(self.alias).filter(id__in=list(ids))
        return {
            r[0]: r[1:] for r in rows.values_list("id", "queue", "type", "run_at", "started_at")
        }

    def _roll_up(
        self,
        before: Mapping[int, tuple[str, str, datetime, datetime | None]],
        recorded: Mapping[int, str],
        at: datetime,
        expired: Set[int] = frozenset(),
    ) -> None:
        """Add the runs ``recorded`` (``{id: state}``) at ``at`` to their minute's rows.

        ``expired``: ids of the runs the reaper ended because their lease ran out.
        """
        observed: list[Observation] = []
        for job_id, state in recorded.items():
            queue, job_type, due_at, started_at = before[job_id]
            observed.append((queue, job_type, state, due_at, started_at, job_id in expired))
        rows = Rollup.objects.using(self.alias)
        minute = _minute(at)
        shard = os.getpid() % ROLLUP_SHARDS
        for (queue, job_type), adds in sorted(tally(observed, at).items()):
            key = {"minute": minute, "queue": queue, "type": job_type, "shard": shard}
            if not rows.filter(**key).update(**{k: F(k) + v for k, v in adds.items()}):
                rows.create(**key, **adds)

    def sample_depth(self, now: datetime | None = None) -> int:
        at = now or timezone.now()
        minute = _minute(at)
        rows = Rollup.objects.using(self.alias)
        with transaction.atomic(using=self.alias):
            _, claimed = rows.get_or_create(
                minute=minute, queue="", type="", shard=0, defaults={"ready": 0, "lag_s": 0.0}
            )
            if not claimed:
                return 0
            samples = depth_samples(self.queue_gauges(now=at), at)
            rows.bulk_create(
                [
                    Rollup(minute=minute, queue=q, type="", ready=n, lag_s=lag)
                    for q, n, lag in samples
                ],
                ignore_conflicts=True,
            )
            rows.filter(minute=minute, queue="", type="", shard=0).update(
                ready=sum(n for _, n, _ in samples),
                lag_s=max((lag for _, _, lag in samples), default=0.0),
            )
        return len(samples) + 1

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        cutoff = (now or timezone.now()) - timedelta(seconds=older_than_s)
        rows = Rollup.objects.using(self.alias)
        old = rows.filter(minute__lt=cutoff).order_by("minute")
        ids = list(old.values_list("id", flat=True)[:limit])
        deleted, _ = rows.filter(id__in=ids).delete()
        return deleted


__all__ = ["GenericRollupStore"]
