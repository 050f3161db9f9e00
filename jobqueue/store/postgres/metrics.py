"""Internal: the metrics' gauges and the per-minute rollup on PostgreSQL.

:class:`PostgresMetrics` is the metrics area of :class:`~jobqueue.store.postgres.PostgresStore`.

The gauges are bounded reads. ``queue_gauges.sql``, ``dead_gauges.sql``, ``waiting_gauges.sql``
and ``count_prunable.sql`` each walk a partial index of ``jobqueue_job`` (see its ``sql/*.sql``
header) and run in one transaction of jobqueue's own with JIT off (``gauges_begin.sql``); the
others are ``running_gauges.sql``, ``concurrency_gauges.sql`` and ``estimate_prunable.sql``.

The admin's reads: each job type's runs over a window of the rollup (``type_totals.sql``), the
dead letters grouped by their last error (``dead_letter_groups.sql``) and one group's ids
(``dead_letter_ids.sql``).

The rollup: the depth sample (``sample_depth.sql``, then ``queue_gauges.sql`` and
``record_depth.sql``) and the pruning (``prune_rollups.sql``). The outcome counts are written by
``finish_many.sql``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime

from jobqueue.models.metrics import bucket_columns
from jobqueue.store import bounded
from jobqueue.store.interface import (
    COUNT_CAP,
    DEAD_LETTER_GROUPS,
    MAX_TENANTS,
    PRUNE_ROLLUPS_LIMIT,
    DeadLetterGroup,
    QueueGauge,
    RunningGauge,
    TypeTotals,
)
from jobqueue.store.postgres.db import PostgresArea
from jobqueue.store.rows import fetchall
from jobqueue.store.shared import depth_samples


class PostgresMetrics(PostgresArea):
    """The metrics' gauges and the per-minute rollup on PostgreSQL."""

    @contextmanager
    def _gauge_transaction(self) -> Iterator[None]:
        with bounded.own_transaction(self.alias):
            with self.db.execute("gauges_begin", {}):
                pass
            yield

    def queue_gauges(
        self, cap: int = COUNT_CAP, max_tenants: int = MAX_TENANTS, now: datetime | None = None
    ) -> list[QueueGauge]:
        params = {"cap": int(cap), "max_tenants": int(max_tenants), "now": now}
        with self._gauge_transaction(), self.db.execute("queue_gauges", params) as cursor:
            rows = fetchall(cursor)
        return [
            QueueGauge(
                queue=r.queue,
                ready=r.ready,
                scheduled=r.scheduled,
                oldest_due=r.oldest_due,
                truncated=r.truncated,
            )
            for r in rows
        ]

    def dead_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        params = {"cap": int(cap), "max_pairs": 10_000}
        with self._gauge_transaction(), self.db.execute("dead_gauges", params) as cursor:
            return {r.queue: r.dead for r in fetchall(cursor)}

    def type_totals(self, start: datetime, end: datetime) -> list[TypeTotals]:
        with self.db.execute("type_totals", {"start": start, "end": end}) as cursor:
            rows = fetchall(cursor)
        columns = bucket_columns("run")
        return [
            TypeTotals(
                type=r.type,
                succeeded=r.succeeded,
                retried=r.retried,
                dead=r.dead,
                cancelled=r.cancelled,
                run_buckets=tuple(getattr(r, c) for c in columns),
                run_count=r.run_count,
                run_sum_s=r.run_sum_s,
            )
            for r in rows
        ]

    def dead_letter_groups(self, limit: int = DEAD_LETTER_GROUPS) -> list[DeadLetterGroup]:
        with self.db.execute("dead_letter_groups", {"limit": int(limit)}) as cursor:
            rows = fetchall(cursor)
        return [
            DeadLetterGroup(
                error_type=r.error_type,
                message=r.message,
                count=r.n,
                first_seen=r.first_seen,
                last_seen=r.last_seen,
                newest_id=r.newest_id,
            )
            for r in rows
        ]

    def dead_letter_ids(self, error_type: str, digest: str, limit: int) -> list[int]:
        params = {"error_type": error_type, "digest": digest, "limit": int(limit)}
        with self.db.execute("dead_letter_ids", params) as cursor:
            return [r.id for r in fetchall(cursor)]

    def waiting_gauges(self, cap: int = COUNT_CAP) -> dict[str, int]:
        params = {"cap": int(cap), "max_queues": 10_000}
        with self._gauge_transaction(), self.db.execute("waiting_gauges", params) as cursor:
            return {r.queue: r.waiting for r in fetchall(cursor)}

    def running_gauges(self, top: int) -> RunningGauge:
        with self.db.execute("running_gauges", {"top": int(top)}) as cursor:
            rows = fetchall(cursor)
        by_queue = {r.queue: r.n for r in rows if r.queue is not None}
        tenants = [(r.tenant_id, r.n) for r in rows if r.tenant_id is not None]
        keys = [(r.key, r.n, r.key_limit) for r in rows if r.key is not None]
        return RunningGauge(by_queue=by_queue, top_tenants=tenants, top_keys=keys)

    def concurrency_gauges(self, top: int) -> list[tuple[str, int, int | None]]:
        with self.db.execute("concurrency_gauges", {"top": int(top)}) as cursor:
            return [(r.key, r.n, r.key_limit) for r in fetchall(cursor)]

    def prunable_by_state(
        self,
        retention: Mapping[str, float],
        cap: int | None,
        now: datetime | None = None,
    ) -> dict[str, int]:
        states = sorted(retention)
        params = {
            "states": states,
            "older_than_s": [float(retention[s]) for s in states],
            "cap": None if cap is None else int(cap),
            "now": now,
        }
        with self._gauge_transaction(), self.db.execute("count_prunable", params) as cursor:
            return {r.state: r.prunable for r in fetchall(cursor)}

    def estimate_prunable(
        self, state: str, older_than_s: float, now: datetime | None = None
    ) -> int | None:
        params = {"state": state, "older_than_s": float(older_than_s), "now": now}
        with self.db.execute("estimate_prunable", params) as cursor:
            (plan,) = cursor.fetchone()
        plan = json.loads(plan) if isinstance(plan, str | bytes) else plan
        return int(plan[0]["Plan"]["Plan Rows"])

    def sample_depth(self, now: datetime | None = None) -> int:
        # One transaction: a process killed between the claim of the minute and its counts
        # leaves no zero-depth minute behind.
        with bounded.own_transaction(self.alias):
            with self.db.execute("sample_depth", {"now": now}) as cursor:
                claimed = cursor.fetchone()
            if claimed is None:
                return 0
            minute, at = claimed
            samples = depth_samples(self.queue_gauges(now=at), at)
            params = {
                "minute": minute,
                "queues": [queue for queue, _, _ in samples],
                "ready": [ready for _, ready, _ in samples],
                "lag_s": [lag for _, _, lag in samples],
            }
            with self.db.execute("record_depth", params) as cursor:
                row = cursor.fetchone()
        return int(row[0]) + 1

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        params = {"older_than_s": older_than_s, "limit": limit, "now": now}
        with self.db.execute("prune_rollups", params) as cursor:
            return int(cursor.rowcount)
