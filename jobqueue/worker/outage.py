"""Internal: a worker through a database outage: waiting it out, then holding the reaper back.

:class:`DatabaseBackoff`: how the claim loop's thread waits out a database that is down.

:class:`ReapHold`: after a database outage, reapers wait one heartbeat interval before reaping.
Every worker sees an outage of the database, and every lease runs out during one longer than the
lease. When the database is back, the first reaper to run would take the leases of jobs whose
handler returned during the outage and whose ack is still waiting in its worker, and those jobs
would run again. So a worker, once its statements work again after failing (and at start, when
it cannot know what came before), reaps only one heartbeat interval later: by then every worker
that lived through the outage has renewed its leases, because its heartbeat is retried at every
tick while the database is away. A worker still cut off after that interval loses its leases as
usual (at least once: the job runs again).

The store's side of an outage (refusing writes while the database is away) is
``jobqueue.store.outage``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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


class ReapHold:
    """When reaping may resume (used by one thread: the worker's heartbeat thread).

    Args:
        hold_s: how long after the database answers again reaping waits, seconds (the
            heartbeat interval).
        clock: monotonic clock, seconds (a stand-in in tests).
    """

    def __init__(self, hold_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold_s = hold_s
        self._clock = clock
        self._down = False
        # At start: as if the database had just come back.
        self._resume_at = clock() + hold_s

    def failed(self) -> None:
        """Record a failed database call: no reaping until one hold after the next success."""
        self._down = True

    def ok(self) -> None:
        """Record a database call that worked; the hold starts at the first one after failures."""
        if self._down:
            self._down = False
            self._resume_at = self._clock() + self.hold_s

    def may_reap(self) -> bool:
        """Return whether the reaper may run now."""
        return not self._down and self._clock() >= self._resume_at
