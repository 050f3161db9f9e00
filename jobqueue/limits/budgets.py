"""Retry budgets per queue: retries may add only a fraction of the queue's successful throughput.

Each queue has a token bucket in the database (``RetryBudget``). Every success earns
``RETRY_BUDGET["ratio"]`` tokens (0.1: retries may add 10 % of the load), every second earns
``floor_per_second`` (so a queue with no recent success can still retry), and the bucket holds at
most ``capacity``. Every retry spends one token. A retry that finds the bucket empty is not dropped
and costs no attempt: it is delayed until the floor would have paid its share of the debt, so a
storm of failures turns into a steady trickle of retries instead of a wave.

A ``RetryAfter`` retry spends its token but keeps its exact time: the service said when.

The ack path is the hot path: successes are credited in memory and written at most once per
:data:`CREDIT_FLUSH_INTERVAL_S` per worker, in one statement for all its queues. Credits not yet
written when a worker stops are lost; the bucket only grows more cautious.

Internal.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from datetime import datetime

from django.db import DatabaseError

from jobqueue.retries import RunOutcome
from jobqueue.settings.conf import get_settings
from jobqueue.states import JobState
from jobqueue.store import ClaimedJob, Store, get_store

__all__ = ["CREDIT_FLUSH_INTERVAL_S", "RetryBudgetKeeper", "debt_delays"]

logger = logging.getLogger("jobqueue.budgets")

#: Longest a worker keeps success credits in memory before writing them, seconds.
CREDIT_FLUSH_INTERVAL_S = 1.0


def debt_delays(count: int, tokens_left: float, floor_per_second: float) -> list[float]:
    """Return how long each of ``count`` retries must wait for the budget, seconds.

    ``tokens_left`` is the bucket after all ``count`` tokens were spent. The ``i``-th retry
    (from 0) left ``tokens_left + count - 1 - i`` tokens; when that is negative it waits until
    the floor refill pays it back: ``-left / floor_per_second``. Otherwise it waits nothing.

    Example: 3 retries leaving -2 tokens at 1 token/s wait 0, 1 and 2 seconds.
    """
    delays = []
    for i in range(count):
        left = tokens_left + count - 1 - i
        delays.append(-left / floor_per_second if left < 0 else 0.0)
    return delays


def reset_budgets(queues: Collection[str], *, using: str | None = None) -> int:
    """Delete the retry budgets of ``queues``: each starts full again at its next retry.

    Args:
        queues: queue names.
        using: database alias (None: ``default``).

    Returns:
        How many buckets were deleted.
    """
    return get_store(using).delete_retry_budgets(queues)


class RetryBudgetKeeper:
    """The worker's side of the retry budgets.

    Args:
        store: the queue's store.
        clock: monotonic clock for the credit flush interval (a stand-in in tests).
    """

    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self.pending: Counter[str] = Counter()
        self.flushed_at = clock()

    def apply(
        self, runs: Iterable[tuple[ClaimedJob, RunOutcome]], now: datetime | None = None
    ) -> dict[int, RunOutcome]:
        """Spend tokens for the retries among ``runs``; return the outcomes it delayed.

        Successes are credited (in memory, flushed every :data:`CREDIT_FLUSH_INTERVAL_S`).

        Returns:
            ``{job_id: outcome with a later delay_s}`` for retries over budget; the error entry
            says by how much (``retry_budget_delay_s``). Empty when the budget is off or on a
            database error (the retries then keep their backoff).
        """
        budget = get_settings().retry_budget
        if budget is None:
            return {}
        retries: dict[str, list[tuple[ClaimedJob, RunOutcome]]] = {}
        for claimed, outcome in runs:
            if outcome.state == JobState.SCHEDULED:
                retries.setdefault(claimed.queue, []).append((claimed, outcome))
            elif outcome.state == JobState.SUCCEEDED:
                self.pending[claimed.queue] += 1
        changed: dict[int, RunOutcome] = {}
        try:
            if retries:
                counts = {queue: len(items) for queue, items in retries.items()}
                left = self.store.take_retry_tokens(counts, budget, now=now)
                for queue, items in retries.items():
                    delays = debt_delays(len(items), left[queue], budget.floor_per_second)
                    for (claimed, outcome), wait in zip(items, delays, strict=True):
                        if wait > outcome.delay_s and not outcome.exact_delay:
                            error = {**(outcome.error or {}), "retry_budget_delay_s": wait}
                            changed[claimed.id] = replace(outcome, delay_s=wait, error=error)
                if changed:
                    logger.warning("retry budget: %d retr(ies) delayed", len(changed))
            if self.pending and self.clock() - self.flushed_at >= CREDIT_FLUSH_INTERVAL_S:
                self.flush(now)
        except DatabaseError as exc:
            logger.error("retry budget unavailable (%s); retries keep their backoff", exc)
            return {}
        return changed

    def flush(self, now: datetime | None = None) -> None:
        """Write the success credits held in memory (one statement for all queues)."""
        budget = get_settings().retry_budget
        if budget is not None and self.pending:
            self.store.credit_retry_tokens(dict(self.pending), budget, now=now)
        self.pending.clear()
        self.flushed_at = self.clock()
