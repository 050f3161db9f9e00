"""Internal: the rollup's depth sample and pruning on PostgreSQL.

``sample_depth.sql`` (then ``queue_gauges.sql`` and ``record_depth.sql``) and
``prune_rollups.sql``. A mixin of
:class:`~jobqueue.store.postgres.PostgresStore`; the outcome counts are written by
``finish_many.sql``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobqueue.store import bounded
from jobqueue.store.interface import PRUNE_ROLLUPS_LIMIT
from jobqueue.store.shared import depth_samples


class PostgresRollupStore:
    """sample_depth, prune_rollups on PostgreSQL; the host provides ``_execute``."""

    _execute: Any
    alias: str
    queue_gauges: Any

    def sample_depth(self, now: datetime | None = None) -> int:
        # One transaction: a process killed between the claim of the minute and its counts
        # leaves no zero-depth minute behind.
        with bounded.own_transaction(self.alias):
            with self._execute("sample_depth", {"now": now}) as cursor:
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
            with self._execute("record_depth", params) as cursor:
                row = cursor.fetchone()
        return int(row[0]) + 1

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        params = {"older_than_s": older_than_s, "limit": limit, "now": now}
        with self._execute("prune_rollups", params) as cursor:
            return int(cursor.rowcount)
