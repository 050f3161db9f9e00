"""Internal: a suspect job runs alone in its worker process.

A job is *suspect* when its worker process died while it ran beside other jobs (``Store.hand_back``
in ``jobqueue/store/interface.py``): the supervisor cannot tell which of them killed the process, so
none was charged. Running each suspect alone settles it: if the process dies again while it holds
only that job, the job is charged (it is the culprit); if it finishes, it was innocent. So only a
job that kills its process keeps paying for it, and it pays at most one uncharged run (the one in
company).

The rule, applied by the claim loop (``Worker._loop``):

* a batch that brings a suspect job to a process that is running others gives the suspect back
  (its attempt not counted), and the process claims nothing more until it is empty; then it
  claims one job, which is likely the suspect again;
* a suspect job claimed by an empty process starts alone; the rest of its batch is given back,
  and nothing is claimed until it is done.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from django.db import DatabaseError

from jobqueue.errors import LeaseLost
from jobqueue.logging import job_extra
from jobqueue.store import ClaimedJob, Store

logger = logging.getLogger("jobqueue.worker")

#: Error message of a job given back so that a suspect job can run alone (or a suspect job given
#: back because its process is busy).
GIVEN_BACK_MESSAGE = "given back unstarted (a suspect job runs alone); the attempt is not counted"


class SoloGate:
    """Decide how many jobs a worker claims and which of them start: a suspect job runs alone.

    One per worker; used by the claim loop's thread only.
    """

    def __init__(self) -> None:
        self._solo: int | None = None
        self._waiting = False

    def claim_size(self, free: int, running: Collection[int]) -> int:
        """Return how many jobs to claim now.

        Args:
            free: free slots (concurrency minus running jobs).
            running: ids of the jobs the worker holds.

        Returns:
            0 while a suspect job runs alone or while waiting for the worker to empty for one;
            1 once it is empty (the suspect job is likely next); else ``free``.
        """
        if self._solo is not None:
            if self._solo in running:
                return 0
            self._solo = None
        if self._waiting:
            if running:
                return 0
            self._waiting = False
            return min(free, 1)
        return free

    def admit(
        self, claimed: Sequence[ClaimedJob], running: Collection[int]
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """Split a claimed batch into the jobs to start and the jobs to give back.

        Args:
            claimed: the jobs just claimed, in claim order.
            running: ids of the jobs the worker held before this claim.

        Returns:
            ``(start, give_back)``.
        """
        suspects = [job for job in claimed if job.suspect]
        if not suspects:
            return list(claimed), []
        if running:
            self._waiting = True
            return [job for job in claimed if not job.suspect], suspects
        solo = suspects[0]
        self._solo = solo.id
        return [solo], [job for job in claimed if job is not solo]


def give_back(
    store: Store, jobs: Sequence[ClaimedJob], *, message: str = GIVEN_BACK_MESSAGE
) -> None:
    """Release ``jobs`` unstarted (their attempt not counted); a failure leaves the lease to expire.

    Args:
        store: the worker's store.
        jobs: claimed jobs that were not started.
        message: why, in each job's history (default: a suspect job runs alone).
    """
    for job in jobs:
        try:
            store.release(job.id, job.lease_token, message=message)
        except LeaseLost:
            pass
        except DatabaseError as exc:
            logger.error(
                "job %s: could not give back (%s); its lease will expire",
                job.id,
                exc,
                extra=job_extra(job),
            )
