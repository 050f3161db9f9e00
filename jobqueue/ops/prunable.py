"""Internal: how many finished jobs wait for the pruner (FIELD-CASES 31's gauge), bounded.

``prunejobs --dry-run`` counts exactly; a scrape every few seconds must not walk a backlog of
millions. So this counts at most :data:`EXACT_UP_TO` rows per state (the store's
``prunable_by_state``: a range of the finished index (state, finished_at) read in its own order,
never the table), and past that gives PostgreSQL's estimate of the whole range (one EXPLAIN, no
rows read). Elsewhere (SQLite, no estimate) it reads as the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from jobqueue.store import get_store

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
    kept = {state: float(s) for state, s in retention.items() if s is not None}
    if not kept:
        return {}
    store = get_store(using)
    counts = store.prunable_by_state(kept, exact_up_to, now)
    for state, n in counts.items():
        if n >= exact_up_to:
            estimate = store.estimate_prunable(state, kept[state], now)
            counts[state] = max(estimate or 0, exact_up_to)
    return counts
