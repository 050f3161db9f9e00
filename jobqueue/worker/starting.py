"""Internal: start claimed jobs on handler threads or the event loop; fail those past timeout.

A sync handler runs on a handler thread (``jobqueue/worker/threads.py``), an ``async def`` one as
a task on the worker's event loop (``jobqueue/worker/eventloop.py``), each through the executor,
and its outcome goes to the completer. A run that passes its ``timeout_s`` is failed here at
once; a thread runs on (Python cannot kill a thread) and what it returns is ignored, a task is
cancelled.

Slots: ``concurrency`` for sync runs, ``async_concurrency`` for async ones, and one claim fills
both (:meth:`Starter.free`). A job's kind is known only once it is claimed, so a claim may bring
more sync jobs than threads are free: those are given back unstarted, their attempt not counted
(:meth:`Starter.fit`), and the async slots are left out of the claims for a poll interval
(docs/decisions.md, "Async jobs on one event loop"). A worker that has no queue of async types
only and has claimed no async job claims for its threads only, as before.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from django.db import close_old_connections

from jobqueue.errors import JobTimeout
from jobqueue.logging import job_extra
from jobqueue.registry import JobType, registry, resolve_handler
from jobqueue.retries import RunOutcome
from jobqueue.store import ClaimedJob
from jobqueue.worker.completer import Completer
from jobqueue.worker.context import JobContext
from jobqueue.worker.eventloop import EventLoopRuns
from jobqueue.worker.executor import execute, failure_outcome, is_async
from jobqueue.worker.runs import Run, Runs
from jobqueue.worker.stalls import LoopStalls
from jobqueue.worker.threads import HandlerThreads

logger = logging.getLogger("jobqueue.worker")


#: The longest the async slots stay out of the claims after sync jobs were given back, seconds.
MAX_ASYNC_HOLD_S = 60.0


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
    """Run jobs on handler threads or the event loop, and fail the runs that pass their timeout.

    Args:
        runs: the worker's runs; a started job is added to them.
        completer: takes each outcome.
        worker_id: the worker's name (in job contexts and error entries).
        concurrency: the worker's sync slots (the thread cap is twice this).
        on_runaway: called after a run was failed for its timeout, while its handler runs on.
        async_concurrency: the worker's async slots (``ASYNC_CONCURRENCY``).
        hold_async_s: how long the async slots stay out of the claims after a claim brought
            sync jobs no thread could take, seconds.
        serves: ``serves(queue)``: whether the worker names ``queue``; a named queue whose
            registered types are all ``async def`` makes its claims fill the loop from the
            start (a queue that also has sync types waits for an async job to be claimed).
    """

    def __init__(
        self,
        runs: Runs,
        completer: Completer,
        *,
        worker_id: str,
        concurrency: int,
        on_runaway: Callable[[], None],
        async_concurrency: int = 100,
        hold_async_s: float = 1.0,
        serves: Callable[[str], bool] | None = None,
    ) -> None:
        self.runs = runs
        self.completer = completer
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.threads = HandlerThreads(self._run_job, completer.deliver, concurrency=concurrency)
        #: Stalls of the event loop (``stalls.py``), reported by the worker's maintenance.
        self.stalls = LoopStalls(worker_id)
        self.loop = EventLoopRuns(
            completer.deliver, limit=async_concurrency, worker_id=worker_id, stalls=self.stalls
        )
        self._on_runaway = on_runaway
        self._hold_async_s = hold_async_s
        self._held_s = hold_async_s
        self._async_held_until = 0.0
        #: Whether this worker expects async jobs (a named queue of async types only, or an
        #: async job it claimed): only then do its claims fill the loop. One async type among
        #: a queue's sync ones (the default queue, say) does not: its claims would bring a
        #: hundred sync jobs to give back, out of their turn, at every round.
        self.serves_async = False
        kinds: dict[str, set[bool]] = {}
        for job_type in registry().values():
            if serves is not None and serves(job_type.queue):
                kinds.setdefault(job_type.queue, set()).add(is_async(job_type))
        if any(found == {True} for found in kinds.values()):
            self._saw_async()

    def _saw_async(self) -> None:
        if not self.serves_async:
            self.serves_async = True
            # A full worker is one whose threads and loop are both full (completer.py).
            self.completer.concurrency = self.concurrency + self.loop.limit

    def free(self, ending: list[Run] | tuple[Run, ...] = ()) -> int:
        """Return how many jobs a claim may take now: free sync slots, plus free async ones.

        Args:
            ending: runs whose outcomes are being recorded now (their slots count as free).
        """
        ending_async = sum(run.on_loop for run in ending)
        ending_sync = len(ending) - ending_async
        free = min(self.concurrency - self.runs.on_threads + ending_sync, self.threads.room())
        if self.serves_async and time.monotonic() >= self._async_held_until:
            free += self.loop.limit - self.runs.on_loop + ending_async
        return max(free, 0)

    def fit(
        self, jobs: list[ClaimedJob], job_types: dict[int, JobType | None]
    ) -> tuple[list[ClaimedJob], list[ClaimedJob]]:
        """Split claimed ``jobs`` into those a slot of their kind takes and those to give back.

        Returns:
            ``(start, give_back)``, each in claim order.
        """
        sync_room = min(self.concurrency - self.runs.on_threads, self.threads.room())
        async_room = self.loop.limit - self.runs.on_loop
        start: list[ClaimedJob] = []
        back: list[ClaimedJob] = []
        for job in jobs:
            if is_async(job_types.get(job.id)):
                self._saw_async()
                fits = async_room > 0
                async_room -= fits
            else:
                fits = sync_room > 0
                sync_room -= fits
            (start if fits else back).append(job)
        if any(not is_async(job_types.get(job.id)) for job in back):
            # Sync jobs ahead of async ones: claim for threads only for a while, or the next
            # claim would take and give back the same jobs at once; twice as long each time
            # in a row (a queue of sync jobs behind one async job once seen), up to a minute.
            self._async_held_until = time.monotonic() + self._held_s
            self._held_s = min(self._held_s * 2, MAX_ASYNC_HOLD_S)
        elif any(is_async(job_types.get(job.id)) for job in start):
            self._held_s = self._hold_async_s
        return start, back

    def start(self, job: ClaimedJob, job_type: JobType | None) -> None:
        """Start ``job`` (its type resolved by :func:`resolve_type`) on a thread or the loop.

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
        if job_type is not None and is_async(job_type):
            self.runs.add(Run(claimed=job, context=context, job_type=job_type, on_loop=True))
            self.loop.submit(job, context, job_type)
            return
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
            self.completer.overran(claimed.lease_token)
            # An async run's task is cancelled by this (its context's stop callback).
            run.context.mark_timed_out()
            if run.on_loop:
                logger.warning(
                    "%s ran past its timeout of %g s: failing the attempt; its task is cancelled",
                    run.label,
                    claimed.timeout_s,
                    extra=run.extra(),
                )
                continue
            self.threads.overran(claimed.lease_token)
            logger.warning(
                "%s ran past its timeout of %g s: failing the attempt; the handler's thread "
                "runs on until it returns, and its result will be ignored",
                run.label,
                claimed.timeout_s,
                extra=run.extra(),
            )
            self._on_runaway()
