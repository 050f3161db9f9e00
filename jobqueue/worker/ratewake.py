"""Internal: an idle worker's wake-up for rate limits (issue 18): no busy polling, no late claim.

After a claim that found fewer jobs than it had slots for, a worker with rate limits asks the
store when the soonest drained limiter has a token again (``rate_limit_wait``) and sets a timer
for then, when it is sooner than its poll: held-back jobs start when their tokens are due, and a
worker whose limiters all have tokens (or are idle) sleeps its poll interval as before.
"""

from __future__ import annotations

import contextlib

from django.db import DatabaseError

from jobqueue.settings.rates import RateLimits
from jobqueue.store import Store
from jobqueue.worker.wakeups import WakeUps


def rate_wake(
    store: Store,
    rates: RateLimits,
    wakeups: WakeUps,
    poll_interval_s: float,
    since_s: float = 0.0,
) -> bool:
    """Set a timer on ``wakeups`` for when a drained limiter of ``rates`` has a token again.

    Args:
        store: the worker's store.
        rates: the worker's limits; nothing is read without any.
        wakeups: the claim loop's bell and timers.
        poll_interval_s: the worker's poll, seconds: a later wake-up is left to the poll.
        since_s: seconds since the claim before this call began: a limiter drained then counts
            (``Store.rate_limit_wait``).

    Returns:
        Whether a limiter is drained (its jobs may be waiting for its next token): a ``--burst``
        worker waits for them instead of exiting. False after a database error.

    Raises:
        Nothing: a database error is left for the next claim to report and back off from.
    """
    if not rates.enabled:
        return False
    with contextlib.suppress(DatabaseError):
        wait_s = store.rate_limit_wait(rates, since_s)
        if wait_s is not None and wait_s < poll_interval_s:
            wakeups.add_timer(wait_s)
        return wait_s is not None
    return False
