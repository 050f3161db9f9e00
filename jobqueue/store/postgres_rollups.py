"""Internal: the rollup's depth sample and pruning on PostgreSQL.

``sample_depth.sql`` and ``prune_rollups.sql``. A mixin of
:class:`~jobqueue.store.postgres.PostgresStore`; the outcome counts are written by
``finish_many.sql``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .rollups import PRUNE_ROLLUPS_LIMIT


class PostgresRollupStore:
    """sample_depth, prune_rollups on PostgreSQL; the host provides ``_execute``."""

    _execute: Any

    def sample_depth(self, now: datetime | None = None) -> int:
        with self._execute("sample_depth", {"now": now}) as cursor:
            return len(cursor.fetchall())

    def prune_rollups(
        self, older_than_s: float, limit: int = PRUNE_ROLLUPS_LIMIT, now: datetime | None = None
    ) -> int:
        params = {"older_than_s": older_than_s, "limit": limit, "now": now}
        with self._execute("prune_rollups", params) as cursor:
            return int(cursor.rowcount)
