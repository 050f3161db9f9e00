"""Internal: the worker-row pruning service: forget workers that died without saying so."""

from __future__ import annotations

import logging

logger = logging.getLogger("jobqueue.worker")

#: A worker row not refreshed for this long (seconds) belongs to a process that died without
#: exiting cleanly; any worker deletes it. Until then the admin shows it as not alive.
WORKER_ROW_RETENTION_S = 3600.0
#: How often each worker looks for such rows, seconds.
WORKER_PRUNE_INTERVAL_S = 60.0


class WorkerRowPruner:
    """Delete the rows of workers silent for :data:`WORKER_ROW_RETENTION_S`: a service.

    Args:
        store: the queue's store.
    """

    name = "worker rows"
    interval_s = WORKER_PRUNE_INTERVAL_S

    def __init__(self, store) -> None:
        self.store = store

    def run_once(self) -> int:
        """Delete the silent workers' rows; return how many.

        Raises:
            DatabaseError: the database is unavailable.
        """
        gone = self.store.prune_workers(WORKER_ROW_RETENTION_S)
        if gone:
            logger.info(
                "removed %d worker row(s) silent for over %.0f s", gone, WORKER_ROW_RETENTION_S
            )
        return gone
