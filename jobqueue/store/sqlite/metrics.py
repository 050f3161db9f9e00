"""Internal: the metrics' gauges and the per-minute rollup on the ORM.

:class:`GenericMetrics` is the metrics area of :class:`~jobqueue.store.sqlite.GenericStore`.

The gauges are plain grouped counts, capped afterwards to match the PostgreSQL store's answers: a
SQLite queue is small, and SQLite has no planner estimate to fall back on.

The rollup: :meth:`~GenericMetrics.roll_up` is called by ``finish_many`` inside its transaction,
after one read of the batch's rows before they change (:meth:`~GenericMetrics.before`: their
``run_at``), then makes one upsert per (queue, type) of the batch, in this process's shard
(process id mod ``ROLLUP_SHARDS``). The depth sample and the pruning are here too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Set
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, F, Max, Min, Q
from django.utils import timezone

from jobqueue.models import Job, Rollup
from jobqueue.models.metrics import ROLLUP_SHARDS
from jobqueue.states import CLAIMABLE, JobState
from jobqueue.store.interface import (
    COUNT_CAP,
    MAX_TENANTS,
    PRUNE_ROLLUPS_LIMIT,
    Observation,
    QueueGauge,
    RunningGauge,
)
from jobqueue.store.shared import depth_samples, tally
from jobqueue.store.sqlite.db import GenericArea


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


class GenericMetrics(GenericArea):
    """The metrics' gauges and the per-minute rollup on the ORM."""

    def queue_gauges(
        self, cap: int = COUNT_CAP, max_tenants: int = MAX_TENANTS, now: datetime | None = None
    ) -> list[QueueGauge]:
        now = now or timezone.now()
        due = Q(run_at__lte=now)
        rows = (
            Job.objects.using(self.alias)
            .filter(state__in=sorted(CLAIMABLE))
            .values("queue")
            .annotate(n=Count("id"), due=Count("id", filter=due), oldest=Min("run_at", filter=due))
            .order_by("queue")
        )
        return [
            QueueGauge(
                queue=r["queue"],
                ready=min(r["due"], cap),
                scheduled=min(r["n"] - r["due"], cap),
                oldest_due=r["oldest"],
            )
            for r in rows
        ]

    def dead_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        rows = (
            Job.objects.using(self.alias)
            .filter(state=JobState.DEAD)
            .values("queue")
            .annotate(n=Count("id"))
            .order_by("queue")
        )
        return {r["queue"]: min(r["n"], cap) for r in rows}

    def waiting_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        rows = (
            Job.objects.using(self.alias)
            .filter(state=JobState.WAITING)
            .values("queue")
            .annotate(n=Count("id"))
            .order_by("queue")
        )
        return {r["queue"]: min(r["n"], cap) for r in rows}

    def running_gauges(self, top: int) -> RunningGauge:
        leased = Job.objects.using(self.alias).filter(state=JobState.LEASED)
        by_queue = {
            r["queue"]: r["n"]
            for r in leased.values("queue").annotate(n=Count("id")).order_by("queue")
        }
        tenants = leased.values("tenant_id").annotate(n=Count("id")).order_by("-n", "tenant_id")
        return RunningGauge(
            by_queue=by_queue,
            top_tenants=[(r["tenant_id"], r["n"]) for r in tenants[:top]],
            top_keys=self.concurrency_gauges(top),
        )

    def concurrency_gauges(self, top: int) -> list[tuple[str, int, int | None]]:
        keys = (
            Job.objects.using(self.alias)
            .filter(state=JobState.LEASED, concurrency_key__isnull=False)
            .values("concurrency_key")
            .annotate(n=Count("id"), limit=Max("concurrency_limit"))
            .order_by("-n", "concurrency_key")
        )
        return [(str(r["concurrency_key"]), r["n"], r["limit"]) for r in keys[:top]]

    def prunable_by_state(
        self,
        retention: Mapping[str, float],
        cap: int | None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        now = now or timezone.now()
        counts = {}
        for state in sorted(retention):
            cutoff = now - timedelta(seconds=retention[state])
            rows = Job.objects.using(self.alias).filter(state=state, finished_at__lt=cutoff)
            n = rows.count()
            counts[state] = n if cap is None else min(n, cap)
        return counts

    def estimate_prunable(
        self, state: str, older_than_s: float, now: datetime | None = None
    ) -> int | None:
        return None

    def before(self, ids: Iterable[int]) -> dict[int, tuple[str, str, datetime, datetime | None]]:
        """Return ``{id: (queue, type, run_at, started_at)}`` of rows about to be finished."""
        rows = Job.objects.using(self.alias).filter(id__in=list(ids))
        return {
            r[0]: r[1:] for r in rows.values_list("id", "queue", "type", "run_at", "started_at")
        }

    def roll_up(
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
