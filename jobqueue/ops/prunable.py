"""Internal: how many finished jobs wait for the pruner (FIELD-CASES 31's gauge), bounded.

``prunejobs --dry-run`` counts exactly; a scrape every few seconds must not walk a backlog of
millions, so this count stops at :data:`CAP` rows: ``SELECT count(*) FROM (SELECT finished_at
... ORDER BY finished_at LIMIT cap)``, which the planner serves from the finished index (state,
finished_at) in its own order. A value equal to the cap means "at least".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from ..models import Job

#: Most rows counted per state in one scrape.
CAP = 100_000


def awaiting_prune(
    retention: Mapping[str, float | None], now: datetime, using: str = "default", cap: int = CAP
) -> dict[str, int]:
    """Return finished state -> jobs past its retention (at most ``cap`` each).

    Args:
        retention: state -> seconds kept (None: kept forever, left out of the result).
        now: the instant retention is measured from (the database clock).
        using: database alias of the queue.
        cap: most rows counted per state.
    """
    counts = {}
    for state, seconds in sorted(retention.items()):
        if seconds is None:
            continue
        cutoff = now - timedelta(seconds=seconds)
        # Ordered by the index's own order: reading the index is then the cheaper plan even
        # when most of the table has expired (a sequential scan would need a sort of it all).
        rows = (
            Job.objects.using(using)
            .filter(state=state, finished_at__lt=cutoff)
            .order_by("finished_at")
            .values_list("finished_at")
        )
        counts[state] = rows[:cap].count()
    return counts
