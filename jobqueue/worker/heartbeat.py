"""Internal: the heartbeat service: extend every lease the worker holds, in one statement.

Every lease/3 it renews the leases of the worker's runs, tells a handler whose job's cancel was
requested, marks a run whose lease was lost (its outcome will not be recorded), and refreshes
the worker's row (running jobs, draining or not).
"""

from __future__ import annotations

import logging
import threading

from jobqueue.store import bounded
from jobqueue.worker.runs import Runs

logger = logging.getLogger("jobqueue.worker")


class Heartbeat:
    """Renew the worker's leases: a :class:`~jobqueue.maintenance.services.Service`.

    Args:
        store: the queue's store.
        runs: the worker's runs.
        worker_id: the name the leases are held under.
        lease_s: lease length, seconds; the heartbeat runs every third of it.
        db_lock: held around the lease write, as around outcome writes: two of the worker's
            connections never lock the same rows in different orders.
        stopping: set once the worker stops claiming (its row then says "draining").
    """

    name = "heartbeat"

    def __init__(
        self,
        store,
        runs: Runs,
        *,
        worker_id: str,
        lease_s: float,
        db_lock: threading.Lock,
        stopping: threading.Event,
    ) -> None:
        self.store = store
        self.runs = runs
        self.worker_id = worker_id
        self.lease_s = lease_s
        self.interval_s = lease_s / 3
        self._db_lock = db_lock
        self._stopping = stopping

    def run_once(self) -> int:
        """Extend every lease held; return how many were kept.

        Raises:
            DatabaseError: the database is unavailable (the runner retries at its next tick).
        """
        held = self.runs.snapshot()
        leases = [(job_id, r.claimed.lease_token) for job_id, r in held.items()]
        with self._db_lock, bounded.asynchronous_commit():
            kept = self.store.extend_leases(leases, self.lease_s)
        for job_id, run in held.items():
            lease = kept.get(job_id)
            if lease is not None:
                if lease.cancel_requested and not run.context.cancel_requested:
                    run.context.mark_cancel_requested()
                    logger.warning(
                        "%s: cancel requested; telling the handler", run.label, extra=run.extra()
                    )
            # A job whose outcome is in is being recorded (its ack may just have landed); only a
            # job still running has truly lost its lease.
            elif run.outcome is None and not run.context.lease_lost:
                run.context.mark_lease_lost()
                logger.warning(
                    "%s: lease lost (another worker or the reaper took the job); "
                    "its outcome will not be recorded",
                    run.label,
                    extra=run.extra(),
                )
        with bounded.asynchronous_commit():  # the worker's own heartbeat (ASYNCHRONOUS_COMMIT)
            self.store.touch_worker(
                self.worker_id,
                running_jobs=len(held),
                status="draining" if self._stopping.is_set() else "running",
            )
        return len(kept)
