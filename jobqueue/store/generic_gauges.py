"""Internal: the metrics' reads on the ORM. A mixin of the generic store (``generic.py``).

Plain grouped counts, capped afterwards to match the PostgreSQL store's answers: a SQLite queue
is small, and SQLite has no planner estimate to fall back on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.states import CLAIMABLE, JobState
from jobqueue.store.interface import COUNT_CAP, MAX_TENANTS, QueueGauge, RunningGauge


class GenericGaugeStore:
    """The gauge reads on the ORM; the host class provides ``alias``."""

    alias: str

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
