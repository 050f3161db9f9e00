"""Internal: the reaper service: expired leases back to the queue, or dead-lettered.

Every worker reaps (the store's statement is safe in many at once). After a database outage it
waits one heartbeat interval before reaping again (``worker/outage.py``), and it stops when
the worker stops claiming.
"""

from __future__ import annotations

import logging
import threading

from jobqueue.registry import policy_for
from jobqueue.store.finishing import charge_expired
from jobqueue.store.interface import ExpiredLease, ReapDecision
from jobqueue.worker.outage import ReapHold

logger = logging.getLogger("jobqueue.worker")

#: Rounds between two repairs of stranded ordering-key followers by one reaper: every 10 s at the
#: default ``REAPER_INTERVAL_SECONDS``, and, like the rounds, as often per host as one process
#: did (``runworkers --processes``). The repair probes each ordering key that has waiting jobs; a
#: stranding needs a key's job to end between an enqueue statement and its commit, so a rare
#: delay of up to this long is the trade.
STRANDED_EVERY_ROUNDS = 10


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
        self._rounds = 0  # rounds since the last repair: the first round runs it

    def ready(self) -> bool:
        """Return whether the reaper may run now (not stopping, not held after an outage)."""
        return not self._stopping.is_set() and self.hold.may_reap()

    def run_once(self) -> tuple[int, int]:
        """Reap the expired leases; return ``(back to the queue, dead-lettered)``.

        Raises:
            DatabaseError: the database is unavailable.
        """
        # The one rule (``retries.decide`` with no exception), with each job type's backoff.
        retried, dead = self.store.reap(charge_by_type)
        # Ordering-key followers whose parent ended before their enqueue committed (issue 33:
        # enqueues take no lock, so the parent's release could not see them).
        released = self.store.release_stranded() if self._rounds == 0 else 0
        self._rounds = (self._rounds + 1) % STRANDED_EVERY_ROUNDS
        if released:
            logger.warning(
                "reaper: %d ordering-key job(s) released after their key's job ended", released
            )
        if retried or dead:
            logger.warning(
                "reaper: %d expired lease(s) back to the queue, %d dead-lettered", retried, dead
            )
        return retried, dead


def charge_by_type(lease: ExpiredLease) -> ReapDecision:
    """Return the decision for a lease that ran out, with its job type's backoff.

    The store's own default uses ``JOBQUEUE["BACKOFF"]``: it knows no job types. The reaper and
    the hand-back of a dead process (``jobqueue.worker.deaths``) pass this instead, so a type's
    ``@job(backoff=...)`` holds for its expired leases as for its failed runs.

    Args:
        lease: the expired lease (its attempts include the run that ended).

    Returns:
        The :class:`~jobqueue.store.interface.ReapDecision`: dead, or the retry delay in seconds.
    """
    return charge_expired(lease, policy_for(lease.job_type))
