"""Internal: the metrics' gauges and the per-minute rollup on the ORM.

:class:`GenericMetrics` is the metrics area of :class:`~jobqueue.store.sqlite.GenericStore`.

The gauges are plain grouped counts, capped afterwards to match the PostgreSQL store's answers: a
SQLite queue is small, and SQLite has no planner estimate to fall back on.

The admin's reads: each type's runs over a window of the rollup, and the dead letters grouped
by their last error (read row by row: SQLite's JSON paths lack the last element before 3.42).

The rollup: :meth:`~GenericMetrics.roll_up` is called by ``finish_many`` inside its transaction,
after one read of the batch's rows before they change (:meth:`~GenericMetrics.before`: their
``run_at``), then makes one upsert per (queue, type) of the batch, in this process's shard
(process id mod ``ROLLUP_SHARDS``). The depth sample and the pruning are here too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Set
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Max, Min, Q, Sum
from django.utils import timezone

from jobqueue.models import Job, Rollup
from jobqueue.models.metrics import ROLLUP_SHARDS, bucket_columns
from jobqueue.states import CLAIMABLE, JobState
from jobqueue.store.interface import (
    COUNT_CAP,
    DEAD_LETTER_GROUPS,
    MAX_TENANTS,
    PRUNE_ROLLUPS_LIMIT,
    DeadLetterGroup,
    Observation,
    QueueGauge,
    RunningGauge,
    TypeTotals,
    message_digest,
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

    def type_totals(self, start: datetime, end: datetime) -> list[TypeTotals]:
        columns = bucket_columns("run")
        counts = ("succeeded", "retried", "dead", "cancelled", *columns, "run_count")
        # Any: django-stubs types values() rows, not the columns annotate(**sums) adds.
        rows: Any = (
            Rollup.objects.using(self.alias)
            .filter(minute__gte=start, minute__lt=end)
            .exclude(type="")
            .values("type")
            .annotate(**{c: Sum(c) for c in (*counts, "run_sum_s")})
            .order_by("type")
        )
        return [
            TypeTotals(
                type=r["type"],
                succeeded=r["succeeded"],
                retried=r["retried"],
                dead=r["dead"],
                cancelled=r["cancelled"],
                run_buckets=tuple(r[c] for c in columns),
                run_count=r["run_count"],
                run_sum_s=float(r["run_sum_s"]),
            )
            for r in rows
        ]

    def _dead_by_last_error(self) -> Iterator[tuple[tuple[str, str], int, Any]]:
        # SQLite's JSON paths name the last array element only from 3.42 ($[#-1]): read each
        # dead row's history and take its last entry here (a SQLite queue is small).
        dead = Job.objects.using(self.alias).filter(state=JobState.DEAD)
        for pk, errors, finished_at in dead.values_list("pk", "errors", "finished_at").iterator():
            last = errors[-1] if isinstance(errors, list) and errors else {}
            last = last if isinstance(last, dict) else {}
            key = (str(last.get("type") or ""), str(last.get("message") or ""))
            yield key, pk, finished_at

    def dead_letter_groups(self, limit: int = DEAD_LETTER_GROUPS) -> list[DeadLetterGroup]:
        groups: dict[tuple[str, str], list[Any]] = {}
        for key, pk, finished_at in self._dead_by_last_error():
            group = groups.setdefault(key, [0, finished_at, finished_at, pk])
            group[0] += 1
            group[1], group[2] = min(group[1], finished_at), max(group[2], finished_at)
            group[3] = max(group[3], pk)
        found = [
            DeadLetterGroup(
                error_type=key[0],
                message=key[1],
                count=n,
                first_seen=first,
                last_seen=last,
                newest_id=newest,
            )
            for key, (n, first, last, newest) in groups.items()
        ]
        # The PostgreSQL statement's order: most first, then the latest, then by text.
        found.sort(key=lambda g: (g.error_type, g.message))
        found.sort(key=lambda g: (-g.count, -g.last_seen.timestamp()))
        return found[: int(limit)]

    def dead_letter_ids(self, error_type: str, digest: str, limit: int) -> list[int]:
        ids = [
            pk
            for (kind, message), pk, _ in self._dead_by_last_error()
            if kind == error_type and message_digest(message) == digest
        ]
        return sorted(ids, reverse=True)[: int(limit)]

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
