"""Internal: how the claim loop's thread waits out a database that is down."""

from __future__ import annotations

import logging
import threading

from django.db import connections

logger = logging.getLogger("jobqueue.worker")

#: Longest pause between attempts to reach a database that is down, seconds.
MAX_RECONNECT_DELAY_S = 10.0


class DatabaseBackoff:
    """Log a database outage once, and pause longer after each failure (up to a cap).

    Args:
        using: database alias (its connection is closed after each failure).
        stopping: set by a stop, which ends a pause early.
    """

    def __init__(self, using: str, stopping: threading.Event) -> None:
        self.using = using
        self._stopping = stopping
        self.failures = 0

    def failed(self, exc: Exception, doing: str) -> None:
        """Log the failure (the first one loudly), close the connection, and pause."""
        self.failures += 1
        delay = min(0.5 * 2 ** (self.failures - 1), MAX_RECONNECT_DELAY_S)
        if self.failures == 1:
            logger.error("database unavailable while %s: %s; retrying", doing, exc)
        else:
            logger.debug("database still unavailable (%d): %s", self.failures, exc)
        connections[self.using].close()
        # Sleep, but wake for a stop signal.
        self._stopping.wait(delay)

    def recovered(self) -> None:
        """Say once that the database is back, if it was away."""
        if self.failures:
            logger.warning("database is back after %d failed attempt(s)", self.failures)
            self.failures = 0
