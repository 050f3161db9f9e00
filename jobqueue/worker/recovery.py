"""Internal: after a database outage, reapers wait one heartbeat interval before reaping.

Every worker sees an outage of the database, and every lease runs out during one longer than the
lease. When the database is back, the first reaper to run would take the leases of jobs whose
handler returned during the outage and whose ack is still waiting in its worker, and those jobs
would run again. So a worker, once its statements work again after failing (and at start, when
it cannot know what came before), reaps only one heartbeat interval later: by then every worker
that lived through the outage has renewed its leases, because its heartbeat is retried at every
tick while the database is away. A worker still cut off after that interval loses its leases as
usual (at least once: the job runs again).
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
