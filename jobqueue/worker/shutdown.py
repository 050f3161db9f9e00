"""Internal: what a stopping worker does with the runs it still holds: give them back."""

from __future__ import annotations

import logging

from django.db import DatabaseError

from jobqueue.errors import LeaseLost
from jobqueue.worker.runs import Runs

logger = logging.getLogger("jobqueue.worker")


def release_runs(store, runs: Runs, stats: dict[str, int]) -> None:
    """Release the lease of every run still held, back to ``ready``, its attempt not counted.

    A job whose cancel was requested ends cancelled instead. The handlers still running are
    told (their outcome will not be recorded). Failures are logged: such a job reruns when its
    lease expires.

    Args:
        store: the queue's store.
        runs: the worker's runs (left as they are; the caller clears them).
        stats: the worker's counters (``released``, ``cancelled``).
    """
    for job_id, run in runs.items():
        try:
            run.context.mark_lease_lost()
            state = store.release(job_id, run.claimed.lease_token)
            if state == "cancelled":
                stats["cancelled"] += 1
                logger.warning(
                    "%s cancelled at shutdown (its cancel was requested)",
                    run.label,
                    extra=run.extra(),
                )
            else:
                stats["released"] += 1
                logger.warning(
                    "%s released at shutdown (attempt not counted)", run.label, extra=run.extra()
                )
        except LeaseLost:
            pass
        except DatabaseError as exc:
            logger.error(
                "job %s: could not release (%s); it reruns when its lease expires",
                job_id,
                exc,
                extra=run.extra(),
            )
