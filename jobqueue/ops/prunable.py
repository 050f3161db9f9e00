"""Internal: how many finished jobs wait for the pruner (FIELD-CASES 31's gauge), bounded.

``prunejobs --dry-run`` counts exactly; a scrape every few seconds must not walk a backlog of
millions. So this counts at most :data:`EXACT_UP_TO` rows (``SELECT count(*) FROM (SELECT
finished_at ... ORDER BY finished_at LIMIT n)``, which the planner serves from the finished index
(state, finished_at) in its own order), and past that gives PostgreSQL's estimate of the whole
range (one EXPLAIN, no rows read). Elsewhere (SQLite) the count is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db import connections

from ..models import Job
from .estimate import planner_rows

#: Rows counted exactly per state in one scrape; past this, the planner's estimate.
EXACT_UP_TO = 10_000


def awaiting_prune(
    retention: Mapping[str, float | None],
    now: datetime,
    using: str = "default",
    exact_up_to: int = EXACT_UP_TO,
) -> dict[str, int]:
    """Return finished state -> jobs past its retention.

    Args:
        retention: state -> seconds kept (None: kept forever, left out of the result).
        now: the instant retention is measured from (the database clock).
        using: database alias of the queue.
        exact_up_to: most rows counted per state; a bigger backlog is the planner's estimate
            on PostgreSQL (never less than this).
    """
    counts = {}
    postgres = connections[using].vendor == "postgresql"
    for state, seconds in sorted(retention.items()):
        if seconds is None:
            continue
        cutoff = now - timedelta(seconds=seconds)
        rows = Job.objects.using(using).filter(state=state, finished_at__lt=cutoff)
        if not postgres:
            counts[state] = rows.count()
            continue
        # Ordered as the index is: reading it is then the cheaper plan even when most of the
        # table has expired (a sequential scan would have to sort it all).
        capped = rows.order_by("finished_at").values_list("finished_at")[:exact_up_to].count()
        if capped < exact_up_to:
            counts[state] = capped
        else:
            counts[state] = max(planner_rows(rows) or 0, exact_up_to)
    return counts
