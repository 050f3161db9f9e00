"""Internal: start claimed jobs on the worker's handler threads; fail those past their timeout.

A run's handler runs on a handler thread (``jobqueue/worker/threads.py``) through the executor,
and its outcome goes to the completer. A run that passes its ``timeout_s`` is failed here at
once; its thread runs on (Python cannot kill a thread) and what it returns is ignored.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from django.db import close_old_connections

from jobqueue.errors import JobTimeout
from jobqueue.logging import job_extra
from jobqueue.registry import JobType
from jobqueue.retries import RunOutcome
from jobqueue.store import ClaimedJob
from jobqueue.worker.completer import Completer
from jobqueue.worker.context import JobContext
from jobqueue.worker.executor import execute, failure_outcome, resolve_handler
from jobqueue.worker.runs import Run, Runs
from jobqueue.worker.threads import HandlerThreads

logger = logging.getLogger("jobqueue.worker")


def resolve_type(job: ClaimedJob) -> JobType | None:
    """Return the handler of ``job``, or None if it cannot be resolved.

    Called once per run, after the claim. None has no dependency (no breaker holds it back);
    the executor then resolves it again and records why it failed, as the run's error.
    """
    try:
        return resolve_handler(job.job_type)
    except Exception:  # noqa: BLE001 - the run itself records an unknown or broken type
        return None


class Starter:
    """Run jobs on handler threads, and fail the runs that pass their timeout.

    Args:
        runs: the worker's runs; a started job is added to them.
        completer: takes each outcome.
        worker_id: the worker's name (in job contexts and error entries).
        concurrency: the worker's slots (the thread cap is twice this).
        on_runaway: called after a run was failed for its timeout, while its handler runs on.
    """

    def __init__(
        self,
        runs: Runs,
        completer: Completer,
        *,
        worker_id: str,
        concurrency: int,
        on_runaway: Callable[[], None],
    ) -> None:
        self.runs = runs
        self.completer = completer
        self.worker_id = worker_id
        self.threads = HandlerThreads(self._run_job, completer.deliver, concurrency=concurrency)
        self._on_runaway = on_runaway

    def start(self, job: ClaimedJob, job_type: JobType | None) -> None:
        """Start ``job`` (its type resolved by :func:`resolve_type`) on a handler thread.

        Raises:
            ThreadCapReached: no thread is free (the claim loop asks for room before claiming).
        """
        context = JobContext(
            job_id=job.id,
            job_type=job.job_type,
            queue=job.queue,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            worker_id=self.worker_id,
            lease_token=job.lease_token,
            # Progress and checkpoints go straight to the store, fenced by this run's token.
            recorder=self.completer.store,
        )
        self.runs.add(Run(claimed=job, context=context, job_type=job_type))
        self.threads.submit(job.lease_token, job, context, job_type)

    def _run_job(
        self, job: ClaimedJob, context: JobContext, job_type: JobType | None
    ) -> tuple[uuid.UUID, RunOutcome]:
        try:
            outcome = execute(job, context, job_type=job_type)
        except BaseException as exc:
            # execute() turns handler errors into outcomes; this is a failure of that machinery
            # itself (an exception whose str() raises, say). Without an outcome the slot would
            # be lost and the job would sit leased until it timed out.
            logger.exception(
                "job %s: could not turn its run into an outcome",
                job.id,
                extra=job_extra(job, worker_id=self.worker_id),
            )
            outcome = failure_outcome(job, exc, self.worker_id)
        finally:
            # Like the end of a request: roll back and close what the handler opened.
            close_old_connections()
        return job.lease_token, outcome

    def enforce_timeouts(self) -> None:
        """Fail every run past its ``timeout_s`` whose handler has not returned."""
        now = time.monotonic()
        for job_id, run in self.runs.items():
            if run.outcome is not None or now < run.deadline:
                continue
            claimed = run.claimed
            run.outcome = failure_outcome(
                claimed,
                JobTimeout(job_id, claimed.timeout_s),
                self.worker_id,
                duration_s=now - run.started,
            )
            run.done_at = now
            run.context.mark_timed_out()
            self.completer.overran(claimed.lease_token)
            self.threads.overran(claimed.lease_token)
            logger.warning(
                "%s ran past its timeout of %g s: failing the attempt; the handler's thread "
                "runs on until it returns, and its result will be ignored",
                run.label,
                claimed.timeout_s,
                extra=run.extra(),
            )
            self._on_runaway()
