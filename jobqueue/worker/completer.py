"""Internal: the completer: takes the outcomes of a worker's runs, batches them, records them.

Handler threads :meth:`~Completer.deliver` outcomes; the claim loop's thread records them (on its
own connection, so handler threads never pay for a connection of ours). Every outcome that is in
when the loop records goes in as few statements as the store allows, each row still fenced by its
lease token: :meth:`Completer._write` is the one place outcomes reach the store. When they are
written (:meth:`Completer._closes_at`; the rule and why are in docs/decisions.md, "A full worker
holds a small write for at most one round trip"):

* at once when no other job is running (an idle worker claims at once), or when the worker is
  stopping;
* while the worker has free slots (its claims go on their own, unheld), an outcome waits up to
  :data:`OUTCOME_BATCH_WINDOW_S` for others to join it;
* when every slot is taken (the claim for the slots a write frees rides that write): at once if
  the write frees at least :data:`MANY_FREED` of the slots; otherwise it waits for more runs to
  end, no longer than the last write's round trip (:attr:`Completer.round_trip_s`, at most
  :data:`OUTCOME_BATCH_WINDOW_S`), so one write and one claim carry more.

A run the store did not record had lost its lease (another worker or the reaper took the job):
its outcome is discarded, and said so.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from django.db import DatabaseError

from jobqueue.logging import job_extra
from jobqueue.retries import RunOutcome
from jobqueue.store import bounded
from jobqueue.store.interface import ClaimRequest, FinishedThenClaimed
from jobqueue.worker.executor import send_outcome_signal
from jobqueue.worker.guard import DependencyGuard
from jobqueue.worker.runs import Run, Runs
from jobqueue.worker.wakeups import WakeUps

logger = logging.getLogger("jobqueue.worker")

#: Longest an outcome waits for others to be recorded in the same statement, seconds.
OUTCOME_BATCH_WINDOW_S = 0.02

#: A full worker records at once when its outcomes free at least this share of its slots
#: (below it, the claim riding the write is small enough to be worth a short wait). More than
#: half: two groups of runs cannot both reach it, so a burst cannot settle into two half-size
#: round trips (at a half it did: 5 jobs per write at ``--concurrency 10``).
MANY_FREED = 0.75


class Completer:
    """Record the outcomes of a worker's runs, in batches (like River's jobcompleter).

    Args:
        store: the queue's store.
        runs: the worker's runs; a recorded run is removed from them.
        worker_id: the worker's name (in signals).
        using: database alias of the queue (in signals).
        concurrency: the worker's slots (a full worker records at once).
        guard: breakers and retry budgets; they see each outcome before it is recorded.
        db_lock: held around outcome writes, as around the heartbeat's lease write.
        wakeups: rung when an outcome arrives; a retry's due time becomes a timer.
        stopping: set once the worker stops claiming (outcomes are then recorded at once).
        stats: the worker's counters (succeeded, retried, dead, cancelled, lost).
        on_db_error: ``on_db_error(exc, doing)``, called after a write failed on the database
            (it logs and backs off).
    """

    def __init__(
        self,
        store,
        runs: Runs,
        *,
        worker_id: str,
        using: str,
        concurrency: int,
        guard: DependencyGuard,
        db_lock: threading.Lock,
        wakeups: WakeUps,
        stopping: threading.Event,
        stats: dict[str, int],
        on_db_error: Callable[[Exception, str], None],
    ) -> None:
        self.store = store
        self.runs = runs
        self.worker_id = worker_id
        self.using = using
        self.concurrency = concurrency
        self._guard = guard
        self._db_lock = db_lock
        self._wakeups = wakeups
        self._stopping = stopping
        self.stats = stats
        self._on_db_error = on_db_error
        # Items are (lease token, outcome): the token says which run of a job an outcome
        # belongs to, since one worker can hold the same job again after a timeout or a lost
        # lease. Only outcomes travel here; wake-ups have their own bell.
        self._arrivals: queue.SimpleQueue[tuple[uuid.UUID, RunOutcome]] = queue.SimpleQueue()
        # Lease tokens of runs failed for passing timeout_s whose handler has not returned yet.
        self._overrun: set[uuid.UUID] = set()
        #: Set when outcomes could not be recorded: no claim until they are (after an outage,
        #: acks go before new work).
        self.unflushed = False
        # The claim made with the last write, and what it did (take_claimed).
        self._claimed: tuple[ClaimRequest, FinishedThenClaimed] | None = None
        #: How long the last write took (with its claim, if one rode it), seconds: the
        #: longest a full worker holds its outcomes (what the hold can save at most).
        self.round_trip_s = 0.0
        # When (time.monotonic) the last write returned.
        self._written_at = 0.0

    # -- arrivals (handler threads, then the loop) ------------------------------------------

    def deliver(self, item: tuple[uuid.UUID, RunOutcome]) -> None:
        """Take a run's ``(lease token, outcome)`` (called on its handler thread)."""
        self._arrivals.put(item)
        self._wakeups.ring()

    def has_arrivals(self) -> bool:
        """Return whether outcomes were delivered that the loop has not taken yet."""
        return not self._arrivals.empty()

    def overran(self, token: uuid.UUID) -> None:
        """Ignore what the run ``token`` returns: it was failed for passing its timeout."""
        self._overrun.add(token)

    def take_arrived(self) -> None:
        """Attach every delivered outcome to its run (main thread)."""
        while True:
            try:
                token, outcome = self._arrivals.get_nowait()
            except queue.Empty:
                return
            if token in self._overrun:
                # That run was already failed for its timeout; what it returned now is moot.
                self._overrun.discard(token)
                logger.warning(
                    "job %s returned (%s) after its timeout; outcome discarded",
                    outcome.job_id,
                    outcome.state,
                    extra=job_extra(
                        job_id=outcome.job_id,
                        worker_id=self.worker_id,
                        duration_s=outcome.duration_s,
                    ),
                )
                continue
            run = self.runs.get(outcome.job_id)
            # The same job may be held again under a new lease by now: only its own run counts.
            if run is not None and run.claimed.lease_token == token:
                run.outcome = outcome
                run.done_at = time.monotonic()

    # -- recording (the loop's thread) ------------------------------------------------------

    def record_ready(self, claim: Callable[[list[Run]], ClaimRequest | None] | None = None) -> int:
        """Record the outcomes that are in, if their batch is closed; return how many ended.

        Runs whose lease was lost are not written (their outcome is discarded and said so); a
        database error leaves the outcomes for the next pass and sets :attr:`unflushed`.

        Args:
            claim: ``claim(ending)`` returns the claim to make right after the outcomes are
                recorded, in the same round trip (or None for none), given the runs the write
                ends; what it took is then in :meth:`take_claimed`.
        """
        self.unflushed = False
        self._claimed = None
        self.take_arrived()
        done = [run for run in self.runs.values() if run.outcome is not None]
        if not done or not self._batch_closed(done):
            return 0
        self._guard.observe(done, {run.claimed.id: run.job_type for run in done})
        batch = [run for run in done if not run.context.lease_lost]
        ended = 0
        if batch:
            request = None if claim is None else claim(batch)
            states, unwritten = self._write(batch, request)
            self._wake_for_keys(batch, states, request)
            for run in batch:
                job_id = run.claimed.id
                if job_id in unwritten:
                    continue
                if job_id in states:
                    self._recorded(run, states[job_id])
                else:
                    self._lost(run)
                ended += 1
        for run in done:
            # Lost leases: nothing to write; say why the outcome is discarded.
            if run.context.lease_lost and self.runs.get(run.claimed.id) is run:
                self._lost(run)
                ended += 1
        return ended

    def _wake_for_keys(
        self, batch: Sequence[Run], states: dict[int, str], request: ClaimRequest | None
    ) -> None:
        """Wake the other workers when these acks freed slots of concurrency keys.

        A key at its limit is refilled only by a claim made after a slot of it frees: this
        worker's own claim rides the write when it has slots, but it may take other jobs (or
        have no slot), and idle workers of the queue sleep until their poll (which left a full
        key idle for most of a second per run). So unless this worker's claim came back short
        (nothing more it could take: no backlog for anyone serving the same queues), the
        queues of the keyed jobs just finished are notified, as an enqueue notifies them.
        Best effort: polling still finds the job when the notification fails.
        """
        queues = {
            run.claimed.queue
            for run in batch
            if run.claimed.concurrency_key is not None and run.claimed.id in states
        }
        if not queues:
            return
        made = self._claimed
        if request is not None and made is not None:
            claimed = made[1].claimed
            if claimed is not None and len(claimed) < request.max_jobs:
                return  # this worker's claim found nothing more to take
        try:
            self.store.wake_queues(sorted(queues))
        except DatabaseError as exc:
            logger.debug("could not wake the workers of %s: %s", sorted(queues), exc)

    def _batch_closed(self, done: Sequence[Run]) -> bool:
        """Return whether the outcomes in ``done`` should be recorded now, or wait for more."""
        return time.monotonic() >= self._closes_at(done)

    def closes_at(self) -> float | None:
        """Return when (``time.monotonic``) the outcomes taken so far are due to be recorded.

        None when no outcome waits; 0.0 when they are due whatever the clock says.
        """
        done = [run for run in self.runs.values() if run.outcome is not None]
        return self._closes_at(done) if done else None

    def _closes_at(self, done: Sequence[Run]) -> float:
        # The rule, and why, is in docs/decisions.md ("A full worker holds a small write for
        # at most one round trip"). 0.0: now.
        running = len(self.runs)
        if self._stopping.is_set() or len(done) == running:
            # Nothing else is running (nothing could join: an idle worker claims at once),
            # or we are stopping (no claim to fill): waiting would only cost time.
            return 0.0
        if any(run.claimed.concurrency_key is not None for run in done):
            # A keyed run holds a slot of its key until its ack: waiting for company would
            # leave the key's next job waiting as long, on every run of a full key.
            return 0.0
        oldest = min(run.done_at for run in done)
        if running < self.concurrency:
            # Free slots already: claims go on their own, outcomes wait for company.
            return oldest + OUTCOME_BATCH_WINDOW_S
        if len(done) >= MANY_FREED * self.concurrency:
            # A full worker whose write frees many slots: its claim is worth a round trip now.
            return 0.0
        # A full worker whose write would free few slots: hold it (and the claim that rides
        # it) for more runs to end, no longer than a round trip costs, counted from when the
        # loop could first have written them (outcomes that came in during the last write
        # waited for it anyway; the runs it started are the ones worth waiting for).
        held_from = max(oldest, self._written_at)
        return held_from + min(self.round_trip_s, OUTCOME_BATCH_WINDOW_S)

    def take_claimed(self) -> tuple[ClaimRequest, FinishedThenClaimed] | None:
        """Return the claim the last :meth:`record_ready` made with its write, and what it did.

        None when it made none. Its outcomes part is already handled here: only a claim's
        jobs or error are the caller's (``error`` is the claim's only when ``states`` is set).
        """
        taken, self._claimed = self._claimed, None
        return taken

    def _write(
        self, batch: Sequence[Run], request: ClaimRequest | None = None
    ) -> tuple[dict[int, str], set[int]]:
        """Write the outcomes of ``batch``: the one place outcomes reach the store.

        One statement (``finish_many``) for any mix of outcomes; each row is fenced by its own
        lease token, which every outcome carries from its claim. With ``request``, the claim
        follows in the same round trip, in its own transaction (``store.finish_then_claim``).

        Returns:
            ``(states, unwritten)``: the new state of each job recorded (a job of ``batch`` in
            neither had lost its lease), and the ids a database error left unwritten (after
            ``on_db_error`` was called; they are written in a later pass).
        """
        outcomes = []
        for run in batch:
            assert run.outcome is not None
            outcomes.append(run.outcome)
        began = time.monotonic()
        try:
            # The worker's own ack: asynchronous commit (unless it may complete a batch: the
            # store decides; docs/settings.md, ASYNCHRONOUS_COMMIT).
            with self._db_lock, bounded.asynchronous_commit():
                if request is None:
                    states = self.store.finish_many(outcomes)
                else:
                    both = self.store.finish_then_claim(outcomes, request)
                    self._claimed = (request, both)
                    if both.states is None:
                        assert both.error is not None
                        raise both.error
                    states = both.states
        except DatabaseError as exc:
            self.unflushed = True
            self._on_db_error(exc, f"recording {len(outcomes)} outcome(s)")
            return {}, {run.claimed.id for run in batch}
        self._written_at = time.monotonic()
        self.round_trip_s = self._written_at - began
        return states, set()

    def _recorded(self, run: Run, state: str) -> None:
        """Log the outcome the store recorded (one line per job), free the slot, signal it."""
        outcome = run.outcome
        assert outcome is not None
        if state == "succeeded":
            # The hot path: build the line only if it will be written.
            self.stats["succeeded"] += 1
            if logger.isEnabledFor(logging.INFO):
                logger.info("%s succeeded in %s", run.label, run.took, extra=run.extra())
            self.runs.remove(run.claimed.id)
            self._send_outcome_signal(run, state)
            return
        error = outcome.error or {}
        if state == "cancelled":
            self.stats["cancelled"] += 1
            logger.warning(
                "%s cancelled (cancel requested while it ran; handler %s in %s)",
                run.label,
                outcome.state,
                run.took,
                extra=run.extra(),
            )
        elif state == "scheduled":
            self.stats["retried"] += 1
            # This worker knows when its own retry falls due: claim it then, not at a poll.
            self._wakeups.add_timer(outcome.delay_s)
            logger.warning(
                "%s failed in %s, retry in %.2f s: %s: %s",
                run.label,
                run.took,
                outcome.delay_s,
                error.get("type"),
                error.get("message"),
                extra=run.extra(),
            )
        else:
            self.stats["dead"] += 1
            logger.error(
                "%s dead (%s) after %s: %s: %s",
                run.label,
                outcome.dead_reason,
                run.took,
                error.get("type"),
                error.get("message"),
                extra=run.extra(),
            )
        self.runs.remove(run.claimed.id)
        self._send_outcome_signal(run, state)

    def _lost(self, run: Run) -> None:
        """Discard the outcome of a run whose lease was lost; free the slot; signal it."""
        assert run.outcome is not None
        self.stats["lost"] += 1
        logger.warning(
            "%s %s in %s, but its lease was lost (reclaimed by another worker); outcome discarded",
            run.label,
            run.outcome.state,
            run.took,
            extra=run.extra(),
        )
        self._send_outcome_signal(run, "lost")
        self.runs.remove(run.claimed.id)

    def _send_outcome_signal(self, run: Run, state: str) -> None:
        """Send the signal of a recorded outcome: the job's new ``state``, or "lost"."""
        assert run.outcome is not None
        send_outcome_signal(run.claimed, run.outcome, state, self.worker_id, self.using)
