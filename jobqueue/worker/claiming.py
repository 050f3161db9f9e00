"""Internal: a worker's claims, and what it does with the jobs they take.

A claim is made either on its own (:meth:`Claimer.claim`) or with the write of outcomes that
frees its slots, in the same round trip (:meth:`Claimer.request`, then :meth:`Claimer.took`;
``store.finish_then_claim``). Either way the jobs go through the same admission: the breakers
and retry budgets (``guard.py``), a suspect job alone (``solo.py``); the admitted ones start on
handler threads (``starting.py``), the others are given back.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from django.db import DatabaseError

from jobqueue.limits.fairness import QueueSelector
from jobqueue.store import ClaimedJob
from jobqueue.store.bounded import asynchronous_commit, synchronous_commit, timed_out
from jobqueue.store.interface import ClaimRequest, FinishedThenClaimed
from jobqueue.worker.guard import DependencyGuard
from jobqueue.worker.outage import DatabaseBackoff
from jobqueue.worker.served import mark_served
from jobqueue.worker.solo import SoloGate, give_back
from jobqueue.worker.starting import Starter, resolve_type
from jobqueue.worker.wakeups import WakeUps

logger = logging.getLogger("jobqueue.worker")

#: Longest the claim loop stands aside after a short claim for its jobs to begin on their handler
#: threads, seconds (``HandlerThreads.wait_begun``): a bound only, they usually begin within a
#: fraction of a millisecond.
HEAD_START_S = 0.005

#: Error message of a sync job given back because its claim, which also filled the event loop's
#: slots, brought more sync jobs than threads were free.
NO_THREAD_MESSAGE = "given back unstarted (no handler thread was free); the attempt is not counted"


class Claimer:
    """Make a worker's claims and start the jobs they take.

    Args:
        store: the queue's store.
        selector: the worker's queues and their plan (fairness, limits).
        worker_id: the name leases are held under.
        lease_s: lease length, seconds.
        wakeups: the claim loop's bell (a claim answers its pending wake-ups).
        backoff: paces attempts while the database is down.
        guard: breakers and retry budgets (admission).
        solo: runs a suspect job alone (admission).
        running: ids of the jobs the worker holds.
        starter: starts admitted jobs on handler threads.
    """

    def __init__(
        self,
        store,
        selector: QueueSelector,
        *,
        worker_id: str,
        lease_s: float,
        wakeups: WakeUps,
        backoff: DatabaseBackoff,
        guard: DependencyGuard,
        solo: SoloGate,
        running: Collection[int],
        starter: Starter,
    ) -> None:
        self.store = store
        self.selector = selector
        self.worker_id = worker_id
        self.lease_s = lease_s
        self._wakeups = wakeups
        self._backoff = backoff
        self._guard = guard
        self._solo = solo
        self._running = running
        self._starter = starter
        # Whether the last claim came back short (it took all it could: nothing more was
        # there), and the wake-ups counted when it was asked for: until one comes, a claim is
        # repeated only if the store says there is work (``needed``).
        self._short = False
        self._asked_at_generation = -1

    def riding(self) -> bool:
        """Return whether a claim should ride the outcomes' write now (``store.finish_then_claim``).

        Not when the last claim came back short and no wake-up or timer came since: the claim
        would most likely take nothing, and costs the write a claim (with rate limits, a check
        of the buckets and a second claim). The loop then asks :meth:`needed` after the write.
        """
        return (
            not self._short
            or self._wakeups.generation != self._asked_at_generation
            or self._wakeups.timer_due()
        )

    def needed(self) -> bool:
        """Return whether a claim may take anything now; ask the store only when unsure.

        Yes when the last claim was full or failed, a wake-up (a notification, a retry's
        timer, a limiter's refill) came since, or with ``"*"``; otherwise the store is asked
        whether any of the queues holds a ready or scheduled job at all (``store.has_work``:
        one index probe per queue, where a claim writes and, with rate limits, is three
        statements). A job that limits, keys or pauses hold counts as work, so this never
        skips a claim that would take something: it only spares an idle worker's polls and
        the claim after a lone ack their cost (docs/performance.md).
        """
        if self.riding() or self.selector.every:
            return True
        try:
            return bool(self.store.has_work(self.selector.queues))
        except DatabaseError:
            return True  # the claim meets the same error and backs off

    def request(self, free: int) -> ClaimRequest:
        """Return the claim of up to ``free`` jobs to make now (it answers pending wake-ups)."""
        self._asked_at_generation = self._wakeups.generation
        self._wakeups.claiming()
        # The selector's queues: those listed, then those "*" served so far.
        return ClaimRequest(
            self.selector.queues, self.worker_id, free, self.lease_s, self.selector.plan()
        )

    def claim(self, free: int) -> list[ClaimedJob] | None:
        """Claim up to ``free`` jobs and start those admitted; None after a database error."""
        request = self.request(free)
        try:
            with asynchronous_commit():  # the worker's own claim (ASYNCHRONOUS_COMMIT)
                # Each claim's jobs start as soon as it returns (``taken``): with rate limits a
                # short claim is followed by a bucket check and a second claim, and the first
                # claim's jobs need not wait for them (half a trickle's pickup).
                claimed = self.store.claim(
                    request.queues,
                    self.worker_id,
                    free,
                    self.lease_s,
                    plan=request.plan,
                    taken=self._taken,
                )
        except DatabaseError as exc:
            self._failed(exc)
            return None
        self._backoff.recovered()
        mark_served()  # the supervisor's restart backoff is for children that never got here
        self._short = len(claimed) < free
        if self._short and claimed:
            # The loop goes on with its own Python next (the limiters' wait, its sleep), which
            # a woken handler thread would have to wait for to take the GIL: after a short
            # claim nothing is more urgent than its jobs, so they begin first (threads.py).
            self._starter.threads.wait_begun(HEAD_START_S)
        return claimed

    def _taken(self, claimed: list[ClaimedJob]) -> None:
        """Start the jobs one claim statement took (called by the store, between its claims)."""
        self._backoff.recovered()
        mark_served()
        # Giving back what is not admitted is not the claim's write: it commits as it always
        # did, outside the claim's asynchronous scope.
        with synchronous_commit():
            # A second claim's jobs come while the first's already run: a suspect job among
            # those runs alone, so they go back (SoloGate.claim_size counts the runs so far).
            room = self._solo.claim_size(len(claimed), self._running)
            if room < len(claimed):
                give_back(self.store, claimed[room:])
                claimed = claimed[:room]
            if claimed:
                self._start(claimed)

    def took(self, made: FinishedThenClaimed, max_jobs: int) -> list[ClaimedJob] | None:
        """Start what a claim of up to ``max_jobs`` made with an outcomes' write took.

        Returns:
            The jobs it took; None if it made none (the write or the claim failed).
        """
        if made.states is None:
            return None  # the write failed (the completer backed off): no claim was made
        if made.claimed is None:
            assert made.error is not None
            self._failed(made.error)
            return None
        self._backoff.recovered()
        mark_served()
        self._short = len(made.claimed) < max_jobs
        return self._start(made.claimed)

    def _failed(self, exc: Exception) -> None:
        self._short = False
        limit = timed_out(exc)
        if limit is not None:
            # The database is up; another transaction held the claim up (a frozen
            # process holding the capped claim's turn, say). Try again.
            logger.warning("claiming: %s (%s); trying again", limit, exc)
        else:
            self._backoff.failed(exc, "claiming")

    def _start(self, claimed: list[ClaimedJob]) -> list[ClaimedJob]:
        """Start the admitted jobs of ``claimed`` (breakers, suspects); give back the rest."""
        # Each job's type is resolved once per run, here: the breakers, the executor and the
        # completer's breaker count all use it.
        job_types = {job.id: resolve_type(job) for job in claimed}
        # Sync jobs past the free threads (a claim also fills the event loop's slots) go back
        # first, before the breakers count them as admitted (a half-open breaker's probe).
        fits, no_thread = self._starter.fit(claimed, job_types)
        # The queues' weighted-fair turns move past what this worker kept, not what it gave
        # back for want of a thread: those jobs keep their turn (the weighted-queues process
        # test saw a queue's turn spent on jobs given back).
        self.selector.claimed(fits)
        give_back(self.store, no_thread, message=NO_THREAD_MESSAGE)
        start, back = self._solo.admit(self._guard.admit(fits, job_types), self._running)
        give_back(self.store, back)
        for job in start:
            self._starter.start(job, job_types[job.id])
        return claimed
