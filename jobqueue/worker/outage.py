"""Internal: a worker through a database outage: waiting it out, then holding the reaper back.

:class:`DatabaseBackoff`: how the claim loop's thread waits out a database that is down. Every
failure is classified once (``jobqueue/store/failures.py``) and the log says what it is:
``database 'default' is read-only (failover?): cannot execute UPDATE in a read-only
transaction; waiting, nothing claimed``. The first failure of an outage is logged loudly, and so
is every change of kind within it (a failover first cuts the connection, then the reconnected
session finds the database read-only: issue 32 found no line naming it). The pause between
attempts grows to :data:`MAX_RECONNECT_DELAY_S`, but another thread of the worker whose
statement works again after failures (the heartbeat's runner through :class:`ReapHold`, the
listener) cuts it short (:meth:`DatabaseBackoff.answered`): the claim loop resumes with the
first sign of life, not up to ten seconds later (issue 32).

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

from jobqueue.store.failures import Failure, classify

logger = logging.getLogger("jobqueue.worker")

#: Longest pause between attempts to reach a database that is down, seconds.
MAX_RECONNECT_DELAY_S = 10.0
#: How often a pause looks at the stop event while it waits for a wake-up, seconds.
STOP_CHECK_S = 0.1

#: What the claim loop does meanwhile, by what failed (the log line's last words).
_MEANWHILE = {
    "claiming": "waiting, nothing claimed",
    "registering": "waiting to register, nothing claimed",
}


class DatabaseBackoff:
    """Log a database outage by its kind, and pause longer after each failure (up to a cap).

    Args:
        using: database alias (its connection is closed after each failure).
        stopping: set by a stop, which ends a pause early.
    """

    def __init__(self, using: str, stopping: threading.Event) -> None:
        self.using = using
        self._stopping = stopping
        self._answered = threading.Event()
        self.failures = 0
        #: The last failure's classification, or None while the database answers.
        self.failure: Failure | None = None

    def failed(self, exc: Exception, doing: str) -> None:
        """Log the failure (loudly when it starts an outage or changes kind), close, pause.

        Args:
            exc: the database error.
            doing: what failed (``"claiming"``, ``"registering"``, ``"recording 3 outcome(s)"``).
        """
        self.failures += 1
        failure = classify(exc, self.using)
        meanwhile = _MEANWHILE.get(doing, f"{doing} failed; retrying")
        if self.failure is None or failure.kind != self.failure.kind:
            logger.error("%s", failure.describe(meanwhile), extra={"db_failure": failure.kind})
        else:
            logger.debug("%s (%d failures)", failure.describe(meanwhile), self.failures)
        self.failure = failure
        delay = min(0.5 * 2 ** (self.failures - 1), MAX_RECONNECT_DELAY_S)
        connections[self.using].close()
        self._pause(delay)

    def _pause(self, delay: float) -> None:
        """Sleep ``delay`` seconds, or until a stop or :meth:`answered`."""
        self._answered.clear()
        end = time.monotonic() + delay
        while not self._stopping.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return
            if self._answered.wait(min(left, STOP_CHECK_S)):
                logger.debug(
                    "pause cut short (%.1f s left): another statement reached the database", left
                )
                return

    def answered(self) -> None:
        """Say that another of the worker's statements worked: cut a pause short (thread-safe)."""
        if self.failures:
            self._answered.set()

    def recovered(self) -> None:
        """Say once that the database is back, if it was away."""
        if self.failures:
            last = f" (last: {self.failure.summary})" if self.failure is not None else ""
            logger.warning("database is back after %d failed attempt(s)%s", self.failures, last)
            self.failures = 0
            self.failure = None


class ReapHold:
    """When reaping may resume (used by one thread: the worker's heartbeat thread).

    Args:
        hold_s: how long after the database answers again reaping waits, seconds (the
            heartbeat interval).
        clock: monotonic clock, seconds (a stand-in in tests).
        on_back: called at the first database call that works after failures (the worker
            wakes its claim loop there: :meth:`DatabaseBackoff.answered`).
    """

    def __init__(
        self,
        hold_s: float,
        clock: Callable[[], float] = time.monotonic,
        on_back: Callable[[], None] | None = None,
    ) -> None:
        self.hold_s = hold_s
        self._clock = clock
        self._on_back = on_back
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
            if self._on_back is not None:
                self._on_back()

    def may_reap(self) -> bool:
        """Return whether the reaper may run now."""
        return not self._down and self._clock() >= self._resume_at
