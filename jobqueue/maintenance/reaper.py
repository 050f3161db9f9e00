"""Internal: the reaper service: expired leases back to the queue, or dead-lettered.

Every worker reaps (the store's statement is safe in many at once). After a database outage it
waits one heartbeat interval before reaping again (``jobqueue/recovery.py``), and it stops when
the worker stops claiming.
"""

from __future__ import annotations

import logging
import threading

from jobqueue.worker.outage import ReapHold

logger = logging.getLogger("jobqueue.worker")


class Reaper:
    """Reclaim expired leases: a :class:`~jobqueue.maintenance.services.Service`.

    Args:
        store: the queue's store.
        interval_s: seconds between rounds.
        hold: when reaping may resume after an outage (the runner tells it how rounds went).
        stopping: set once the worker stops claiming; a draining worker does not reap.
    """

    name = "reaper"

    def __init__(
        self, store, *, interval_s: float, hold: ReapHold, stopping: threading.Event
    ) -> None:
        self.store = store
        self.interval_s = interval_s
        self.hold = hold
        self._stopping = stopping

    def ready(self) -> bool:
        """Return whether the reaper may run now (not stopping, not held after an outage)."""
        return not self._stopping.is_set() and self.hold.may_reap()

    def run_once(self) -> tuple[int, int]:
        """Reap the expired leases; return ``(back to the queue, dead-lettered)``.

        Raises:
            DatabaseError: the database is unavailable.
        """
        # The store's default decision is the one rule (``retries.decide`` with no exception).
        retried, dead = self.store.reap()
        if retried or dead:
            logger.warning(
                "reaper: %d expired lease(s) back to the queue, %d dead-lettered", retried, dead
            )
        return retried, dead
