"""Internal: one worker process. Claims jobs, runs them on a thread pool, heartbeats, reaps, stops.

Threads, and what each one owns:

* the main thread (``run``): the claim loop, and recording every outcome (ack or nack) on its own
  connection, so handler threads never pay for a connection of ours;
* handler threads (``handler_threads.py``): run one job each, then close their Django connections
  the way a request does (``close_old_connections``); one per slot, plus one per handler still
  running past its timeout, never more than twice ``--concurrency``: when such runaways outgrow
  their half, the process recycles;
* the heartbeat thread: every lease/3 extends all the leases the process holds in one statement,
  refreshes the Worker row, and runs the reaper every ``REAPER_INTERVAL_SECONDS``;
* on PostgreSQL with ``LISTEN_NOTIFY``, the listener thread (``store/notify.py``): wakes the claim
  loop when one of its queues got ready jobs, so an idle worker claims at once instead of at
  its next poll.

Outcomes are recorded in batches: every ack, and every nack, that is in when the main thread
records goes in one statement (``ack_many``, ``nack_many``), each row still fenced by its lease
token. While the worker has free slots (so holding an outcome delays no claim), an outcome waits
up to ``OUTCOME_BATCH_WINDOW_S`` for others to join it; it does not wait when every slot is
taken, when no other job is running, or when the worker is stopping.

Stopping: the first SIGTERM stops claiming and lets running jobs finish for ``grace_s`` seconds
while heartbeats go on; then, or at once on SIGINT or a second SIGTERM, the leases of jobs still
running are released back to ``ready`` without spending their attempt. Under the supervisor the
signals mean what ``jobqueue/stopping.py`` says (a group-wide SIGTERM drains once).
"""

from __future__ import annotations

import enum
import heapq
import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from django.db import DatabaseError, close_old_connections, connections

from .backoff import backoff_for
from .conf import get_settings
from .errors import JobTimeout, LeaseLost
from .executor import Outcome, execute, failure_outcome, send_outcome_signal
from .fairness import QueueSelector, TenantCaps
from .guard import DependencyGuard
from .handler_threads import HandlerThreads
from .jobtypes import JobContext
from .recovery import ReapHold
from .solo import SoloGate, give_back
from .stopping import STANDALONE, StopSignals
from .store import ClaimedJob, ExpiredLease, Nack, ReapDecision, get_store
from .store.bounded import timed_out

if TYPE_CHECKING:
    from .store.notify import ReadyListener

logger = logging.getLogger("jobqueue.worker")

#: A worker row not refreshed for this long (seconds) belongs to a process that died without
#: exiting cleanly; any worker deletes it. Until then the admin shows it as not alive.
WORKER_ROW_RETENTION_S = 3600.0
#: How often each worker looks for such rows, seconds.
WORKER_PRUNE_INTERVAL_S = 60.0

#: Longest pause between attempts to reach a database that is down, seconds.
MAX_RECONNECT_DELAY_S = 10.0

#: Longest an outcome waits for others to be recorded in the same statement, seconds.
OUTCOME_BATCH_WINDOW_S = 0.02

#: Most delayed-job wake-up times a worker remembers (the soonest are kept); beyond them, and
#: for jobs enqueued before it started, polling finds delayed jobs.
MAX_WAKE_TIMERS = 10_000

#: Put on the outcome queue to make the claim loop re-read its wake-up times without claiming.
_Reschedule = enum.Enum("_Reschedule", "RESCHEDULE")  # an enum: a sentinel mypy can narrow
_RESCHEDULE: Final = _Reschedule.RESCHEDULE


def default_worker_id() -> str:
    """Return ``host:pid:random`` — unique even when a restarted container reuses host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Service(Protocol):
    """A background loop a worker runs beside its claim loop (the cron scheduler, the pruner).

    ``run_once`` is called every ``interval_s`` seconds on the service's own thread, until the
    worker stops; it must return promptly. Database errors are logged and retried.
    """

    name: str
    interval_s: float

    def run_once(self) -> None:
        """Do one round of the service's work."""

    # Optional: ``stop()``, called once on the service's thread when the worker stops claiming
    # (the scheduler resigns its leader lease there).


class _OutageLog:
    """One log line when a thread's database calls start failing, one when they work again.

    A database restart must not turn into a line per heartbeat tick from every thread.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0

    def failed(self, exc: Exception) -> None:
        self.failures += 1
        if self.failures == 1:
            logger.error("%s: database unavailable (%s); retrying", self.what, exc)
        else:
            logger.debug("%s: database still unavailable (%d): %s", self.what, self.failures, exc)

    def ok(self) -> None:
        if self.failures:
            logger.warning("%s: database is back after %d failure(s)", self.what, self.failures)
            self.failures = 0


@dataclass(slots=True)
class _Running:
    claimed: ClaimedJob
    context: JobContext
    outcome: Outcome | None = None
    record_failures: int = 0
    started: float = field(default_factory=time.monotonic)
    #: When (``time.monotonic``) the outcome came in; 0.0 while running.
    done_at: float = 0.0

    @property
    def deadline(self) -> float:
        """Return when (``time.monotonic``) this run passes its ``timeout_s``."""
        return self.started + self.claimed.timeout_s


class Worker:
    """A worker process's loops. Build it, then call :meth:`run` (blocking).

    Args:
        queues: queue names to claim from.
        weights: one weight per queue (default all 1): saturated queues are served in
            proportion (see ``jobqueue/fairness.py``).
        strict: serve queues in list order instead: a queue only when those before it have no
            claimable job.
        concurrency: jobs run at once (threads), >= 1.
        lease_s: lease length, seconds; heartbeats every third of it.
        poll_interval_s: longest idle wait between claims, seconds.
        grace_s: how long running jobs may finish after the first SIGTERM, seconds.
        reaper_interval_s: how often expired leases are reclaimed, seconds.
        burst: exit once no job is claimable and none is running.
        worker_id: the name leases are held under; default :func:`default_worker_id`.
        using: database alias of the queue.
        install_signal_handlers: handle the stop signals (only possible in the main thread).
        stop_signals: what each stop signal means (``jobqueue/stopping.py``): ``STANDALONE``
            (default) or, under the supervisor, ``SUPERVISED``.
        listen_notify: wake on PostgreSQL notifications (default ``JOBQUEUE["LISTEN_NOTIFY"]``);
            always off on other databases, where the worker polls.
        services: background loops to run beside the claim loop while the worker is up
            (each on its own thread, ``run_once`` every ``interval_s``); default none.
        recycle_on_overrun: recycle at the first handler that runs past its timeout, not
            only when such runaways outnumber ``concurrency`` (``jobqueue/handler_threads.py``).
            Either way the worker stops claiming, drains, and :meth:`run` returns
            :data:`~jobqueue.supervisor.EXIT_RECYCLE`: the process must end (the supervisor
            replaces it) for the runaway threads to end. Set under ``--processes``.
    """

    def __init__(
        self,
        *,
        queues: Sequence[str],
        weights: Sequence[int] | None = None,
        strict: bool = False,
        concurrency: int | None = None,
        lease_s: float | None = None,
        poll_interval_s: float | None = None,
        grace_s: float | None = None,
        reaper_interval_s: float | None = None,
        burst: bool = False,
        worker_id: str | None = None,
        using: str | None = None,
        install_signal_handlers: bool = True,
        services: Sequence[Service] | None = None,
        recycle_on_overrun: bool = False,
        listen_notify: bool | None = None,
        stop_signals: StopSignals = STANDALONE,
    ) -> None:
        conf = get_settings()
        self.queues = list(queues)
        self.selector = QueueSelector(
            self.queues,
            weights,
            strict=strict,
            caps=TenantCaps(conf.tenant_max_running, conf.tenant_max_running_overrides),
        )
        self.concurrency = concurrency or conf.concurrency
        self.lease_s = lease_s or conf.lease_seconds
        self.poll_interval_s = poll_interval_s or conf.poll_interval_seconds
        self.grace_s = conf.grace_seconds if grace_s is None else grace_s
        self.reaper_interval_s = reaper_interval_s or conf.reaper_interval_seconds
        self.burst = burst
        self.worker_id = worker_id or default_worker_id()
        self.using = using or "default"
        self.install_signal_handlers = install_signal_handlers
        self.stop_signals = stop_signals
        self.services = list(services or [])
        self.recycle_on_overrun = recycle_on_overrun
        self._recycle = False
        self._signalled = False
        #: What :meth:`run` returned, once it has.
        self.exit_code: int | None = None
        self.heartbeat_interval_s = self.lease_s / 3
        self.store = get_store(self.using)
        # Circuit breakers and retry budgets: two hooks, in _loop and _record_ready_outcomes.
        self._guard = DependencyGuard(self.store, self.lease_s)
        # A suspect job (its process died beside others) runs alone: a hook in _loop.
        self._solo = SoloGate()
        self.listen_notify = (
            conf.listen_notify if listen_notify is None else listen_notify
        ) and connections[self.using].vendor == "postgresql"
        self._listener: ReadyListener | None = None
        # Set by the listener's wake-up, cleared by the claim loop before it claims: a burst of
        # notifications queues one wake-up, not one per notification.
        self._wake_pending = False
        # time.monotonic() values at which delayed jobs fall due: a heap, soonest first.
        self._timers: list[float] = []
        self._running: dict[int, _Running] = {}
        self._lock = threading.Lock()
        # Held around multi-row writes on this process's own leases (heartbeat, acks), so two
        # of our connections never lock the same rows in different orders (no deadlock).
        self._db_lock = threading.Lock()
        # SimpleQueue.put is reentrant, so a signal handler may use it to wake the main loop.
        # Items are (lease token, outcome): the token says which run of a job an outcome belongs
        # to, since one worker can hold the same job again after a timeout or a lost lease.
        self._outcomes: queue.SimpleQueue[tuple[uuid.UUID, Outcome] | _Reschedule | None] = (
            queue.SimpleQueue()
        )
        self._handlers = HandlerThreads(
            self._run_job, self._outcomes.put, concurrency=self.concurrency
        )
        self._stopping = threading.Event()
        self._force = threading.Event()
        self._heartbeat_stop = threading.Event()
        # Lease tokens of runs failed for passing timeout_s whose handler has not returned yet.
        self._overrun: set[uuid.UUID] = set()
        self._db_failures = 0
        # Set when outcomes could not be recorded: no claim until they are (after an outage,
        # acks go before new work).
        self._unflushed = False
        self.stats = {
            "succeeded": 0,
            "retried": 0,
            "dead": 0,
            "cancelled": 0,
            "lost": 0,
            "released": 0,
        }

    # -- control ---------------------------------------------------------------------------

    def stop(self, *, force: bool = False) -> None:
        """Stop claiming; with ``force``, also release running jobs now instead of after grace."""
        if force:
            self._force.set()
        self._stopping.set()
        self._outcomes.put(None)

    def _on_signal(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        force = self.stop_signals.forces(signum, stopping=self._signalled)
        repeat = self._signalled
        self._signalled = True
        if force:
            logger.warning("%s: releasing running jobs now", name)
            self.stop(force=True)
        elif repeat:
            logger.info("%s: already draining", name)
        else:
            logger.warning(
                "%s: no new claims; %d running job(s) get %.0f s to finish",
                name,
                len(self._running),
                self.grace_s,
            )
            self.stop()

    @property
    def stop_requested(self) -> bool:
        """Return whether SIGTERM or SIGINT reached this worker (a stop wins over a recycle)."""
        return self._signalled

    @property
    def running_jobs(self) -> int:
        """Return how many jobs this worker is running (or recording) now."""
        return len(self._running)

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or, with ``burst``, until the queues are drained).

        Returns:
            The process exit status: 0, or :data:`~jobqueue.supervisor.EXIT_RECYCLE` when the
            worker stopped itself to be recycled (and no stop signal came meanwhile). Handler
            threads still running at the end are abandoned (their leases released): the caller
            should end the process.
        """
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            for signum in self.stop_signals.handled:
                signal.signal(signum, self._on_signal)
            # The supervisor forks with these blocked, so a stop sent before now waits for us.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self.stop_signals.handled)
        self._register()
        heartbeat = threading.Thread(
            target=self._heartbeat_loop, name="jobqueue-heartbeat", daemon=True
        )
        heartbeat.start()
        service_threads = [
            threading.Thread(
                target=self._service_loop,
                args=(service,),
                name=f"jobqueue-{service.name}",
                daemon=True,
            )
            for service in self.services
        ]
        for thread in service_threads:
            thread.start()
        if self.listen_notify:
            from .store.notify import ReadyListener

            self._listener = ReadyListener(
                self.using, self.queues, self._wake, name=f"jobqueue-listener {self.worker_id}"
            )
            self._listener.start()
        logger.info(
            "worker %s: queues %s, concurrency %d, lease %.1f s%s",
            self.worker_id,
            self.selector.describe(),
            self.concurrency,
            self.lease_s,
            ", burst" if self.burst else "",
        )
        try:
            self._loop()
        finally:
            self._shutdown(heartbeat, service_threads)
        if self._recycle and not self._signalled:
            from .supervisor import EXIT_RECYCLE

            return EXIT_RECYCLE
        return 0

    def _register(self) -> None:
        while not self._stopping.is_set():
            try:
                self.store.register_worker(
                    self.worker_id, self.queues, self.concurrency, self.heartbeat_interval_s
                )
                self._db_recovered()
                return
            except DatabaseError as exc:
                self._db_failed(exc, "registering")

    def _loop(self) -> None:
        deadline: float | None = None
        while True:
            self._enforce_timeouts()
            self._record_ready_outcomes()
            if self._stopping.is_set():
                if deadline is None:
                    deadline = time.monotonic() + self.grace_s
                if not self._running or self._force.is_set() or time.monotonic() >= deadline:
                    return
                self._wait(min(0.2, max(deadline - time.monotonic(), 0.0)))
                continue
            # Claim for free slots only (no local buffer), and never past the thread cap; a
            # suspect job runs alone.
            free = self._solo.claim_size(
                min(self.concurrency - len(self._running), self._handlers.room()), self._running
            )
            claimed: list[ClaimedJob] = []
            if free > 0 and not self._unflushed:
                self._wake_pending = False
                self._due_timers()
                try:
                    claimed = self.store.claim(
                        self.queues,
                        self.worker_id,
                        free,
                        self.lease_s,
                        plan=self.selector.plan(),
                    )
                    self._db_recovered()
                except DatabaseError as exc:
                    limit = timed_out(exc)
                    if limit is not None:
                        # The database is up; another transaction held the claim up (a frozen
                        # process holding the capped claim's turn, say). Try again.
                        logger.warning("claiming: %s (%s); trying again", limit, exc)
                        continue
                    self._db_failed(exc, "claiming")
                    continue
                self.selector.claimed(claimed)
                start, back = self._solo.admit(self._guard.admit(claimed), self._running)
                give_back(self.store, back)
                for job in start:
                    self._start(job)
                if self.burst and not claimed and not self._running:
                    return
                if claimed and len(claimed) == free:
                    continue
            self._wait(self.poll_interval_s)

    def _wake(self, delay_s: float = 0.0) -> None:
        """Make the claim loop claim now, or in ``delay_s`` seconds (called by the listener)."""
        if delay_s > 0:
            self._add_timer(delay_s)
            self._outcomes.put(_RESCHEDULE)
        elif not self._wake_pending:
            self._wake_pending = True
            self._outcomes.put(None)

    def _add_timer(self, delay_s: float) -> None:
        with self._lock:
            heapq.heappush(self._timers, time.monotonic() + delay_s)
            if len(self._timers) > MAX_WAKE_TIMERS:
                # A sorted list is a heap: keep the soonest half.
                self._timers = heapq.nsmallest(MAX_WAKE_TIMERS // 2, self._timers)

    def _due_timers(self) -> None:
        """Forget the wake-up times the claim about to run serves."""
        now = time.monotonic()
        with self._lock:
            while self._timers and self._timers[0] <= now:
                heapq.heappop(self._timers)

    def _wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while True:
            deadlines = [
                r.deadline if r.outcome is None else r.done_at + OUTCOME_BATCH_WINDOW_S
                for r in self._running.values()
            ]
            if (
                self._timers
                and len(self._running) < self.concurrency
                and not self._stopping.is_set()
            ):
                # (With every slot busy, the claim after the next outcome serves it.)
                deadlines.append(self._timers[0])
            # Wake in time to fail a job at its hard limit (not a poll interval later), to
            # record outcomes when their batch window closes, and to claim a delayed job when
            # it falls due.
            wait = max(min([end, *deadlines]) - time.monotonic(), 0.001)
            try:
                item = self._outcomes.get(timeout=wait)
            except queue.Empty:
                return
            if item is not _RESCHEDULE:
                self._take(item)
                return

    def _take(self, item: tuple[uuid.UUID, Outcome] | _Reschedule | None) -> None:
        if item is None or item is _RESCHEDULE:
            return
        token, outcome = item
        if token in self._overrun:
            # That run was already failed for its timeout; what it returned now is moot.
            self._overrun.discard(token)
            logger.warning(
                "job %s returned (%s) after its timeout; outcome discarded",
                outcome.job_id,
                outcome.status,
            )
            return
        running = self._running.get(outcome.job_id)
        # The same job may be held again under a new lease by now: only its own run counts.
        if running is not None and running.claimed.lease_token == token:
            running.outcome = outcome
            running.done_at = time.monotonic()

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        for job_id, running in list(self._running.items()):
            if running.outcome is not None or now < running.deadline:
                continue
            claimed = running.claimed
            running.outcome = failure_outcome(
                claimed,
                JobTimeout(job_id, claimed.timeout_s),
                self.worker_id,
                duration_s=now - running.started,
            )
            running.done_at = now
            running.context.mark_timed_out()
            self._overrun.add(claimed.lease_token)
            self._handlers.overran(claimed.lease_token)
            logger.warning(
                "%s ran past its timeout of %g s: failing the attempt; the handler's thread "
                "runs on until it returns, and its result will be ignored",
                self._label(running),
                claimed.timeout_s,
            )
            self._recycle_if_runaways()

    def _recycle_if_runaways(self) -> None:
        """Stop claiming and recycle once runaway handlers pass their share of the threads."""
        runaways = self._handlers.runaways
        # Up to `concurrency` runaways cost no capacity; one more and a slot has no thread.
        limit = 1 if self.recycle_on_overrun else self.concurrency + 1
        if runaways < limit or self._stopping.is_set():
            return
        self._recycle = True
        logger.warning(
            "recycling this process: %d handler(s) still running past their timeout; no new "
            "claims; running jobs get %.0f s, then a fresh process replaces this one",
            runaways,
            self.grace_s,
        )
        self.stop()

    def _start(self, job: ClaimedJob) -> None:
        context = JobContext(
            job_id=job.id,
            job_type=job.job_type,
            queue=job.queue,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            worker_id=self.worker_id,
        )
        with self._lock:
            self._running[job.id] = _Running(claimed=job, context=context)
        self._handlers.submit(job.lease_token, job, context)

    def _run_job(self, job: ClaimedJob, context: JobContext) -> tuple[uuid.UUID, Outcome]:
        try:
            outcome = execute(job, context)
        except BaseException as exc:
            # execute() turns handler errors into outcomes; this is a failure of that machinery
            # itself (an exception whose str() raises, say). Without an outcome the slot would
            # be lost and the job would sit leased until it timed out.
            logger.exception("job %s: could not turn its run into an outcome", job.id)
            outcome = failure_outcome(job, exc, self.worker_id)
        finally:
            # Like the end of a request: roll back and close what the handler opened.
            close_old_connections()
        return job.lease_token, outcome

    # -- outcomes --------------------------------------------------------------------------

    def _record_ready_outcomes(self) -> None:
        self._unflushed = False
        while True:
            try:
                self._take(self._outcomes.get_nowait())
            except queue.Empty:
                break
        done = [(job_id, r) for job_id, r in list(self._running.items()) if r.outcome is not None]
        if not done or not self._batch_closed(done):
            return
        self._guard.observe([r for _, r in done])
        successes: list[tuple[int, _Running]] = []
        failures: list[tuple[int, _Running]] = []
        for job_id, running in done:
            if not running.context.lease_lost:
                ok = running.outcome.status == "succeeded"  # type: ignore[union-attr]
                (successes if ok else failures).append((job_id, running))
        if successes:
            self._ack_all(successes)
        if failures:
            self._nack_all(failures)
        for job_id, running in done:
            # Lost leases, and rows a batch could not record: one by one, which says why.
            if self._running.get(job_id) is running and running.context.lease_lost:
                self._record(job_id, running)

    def _batch_closed(self, done: list[tuple[int, _Running]]) -> bool:
        """Return whether the outcomes in ``done`` should be recorded now, or wait for more."""
        if (
            self._stopping.is_set()
            or len(done) == len(self._running)
            or len(self._running) >= self.concurrency
        ):
            # Nothing else is running (nothing could join), every slot is taken (the next
            # claim waits for these), or we are stopping: waiting would only cost time.
            return True
        oldest = min(running.done_at for _, running in done)
        return time.monotonic() - oldest >= OUTCOME_BATCH_WINDOW_S

    def _ack_all(self, successes: list[tuple[int, _Running]]) -> None:
        # Jobs that finished while the previous statement ran are acked together: one round trip.
        acks = [
            (job_id, r.claimed.lease_token, r.outcome.result_json)  # type: ignore[union-attr]
            for job_id, r in successes
        ]
        self._record_batch(successes, self.store.ack_many, acks, f"acking {len(acks)} job(s)")

    def _nack_all(self, failures: list[tuple[int, _Running]]) -> None:
        # Failed attempts, like acks, go in one statement; each row is fenced by its own token.
        nacks = [
            Nack(
                id=job_id,
                lease_token=r.claimed.lease_token,
                error=r.outcome.error or {},  # type: ignore[union-attr]
                dead_reason=r.outcome.dead_reason if r.outcome.status == "dead" else None,  # type: ignore[union-attr]
                delay_s=r.outcome.delay_s,  # type: ignore[union-attr]
            )
            for job_id, r in failures
        ]
        self._record_batch(
            failures, self.store.nack_many, nacks, f"recording {len(nacks)} failed job(s)"
        )

    def _record_batch(
        self,
        runs: list[tuple[int, _Running]],
        write: Callable[[Any], dict[int, str]],
        rows: Any,
        doing: str,
    ) -> None:
        """Write ``rows`` with ``write`` (one statement); finish each run it recorded.

        A run the statement did not record (its lease was lost meanwhile) is recorded on its
        own, which says why; a database error leaves every run for the next pass.
        """
        try:
            with self._db_lock:
                states = write(rows)
        except DatabaseError as exc:
            self._unflushed = True
            self._db_failed(exc, doing)
            return
        for job_id, running in runs:
            if job_id in states:
                self._recorded(job_id, running, states[job_id])
            else:
                self._record(job_id, running)

    @staticmethod
    def _label(running: _Running) -> str:
        c = running.claimed
        return f"job {c.id} {c.job_type} attempt {c.attempt}/{c.max_attempts}"

    @staticmethod
    def _took(running: _Running) -> str:
        return f"{running.outcome.duration_s * 1000:.1f} ms"  # type: ignore[union-attr]

    def _record(self, job_id: int, running: _Running) -> None:
        claimed, outcome = running.claimed, running.outcome
        assert outcome is not None
        token = claimed.lease_token
        try:
            if running.context.lease_lost:
                raise LeaseLost(job_id)
            with self._db_lock:
                if outcome.status == "succeeded":
                    state = self.store.ack(job_id, token, outcome.result_json)
                else:
                    assert outcome.error is not None
                    state = self.store.nack(
                        job_id,
                        token,
                        outcome.error,
                        dead_reason=outcome.dead_reason if outcome.status == "dead" else None,
                        delay_s=outcome.delay_s,
                    )
        except LeaseLost:
            self.stats["lost"] += 1
            logger.warning(
                "%s %s in %s, but its lease was lost (reclaimed by another worker); "
                "outcome discarded",
                self._label(running),
                outcome.status,
                self._took(running),
            )
            self._send_outcome_signal(running, "lost")
        except DatabaseError as exc:
            # Keep the job (and its heartbeat) and try again on the next pass: the outcome is
            # recorded when the database is back, or the job runs again once its lease expires.
            running.record_failures += 1
            self._unflushed = True
            self._db_failed(exc, f"recording {self._label(running)}")
            return
        else:
            self._recorded(job_id, running, state)
            return
        with self._lock:
            self._running.pop(job_id, None)

    def _recorded(self, job_id: int, running: _Running, state: str) -> None:
        """Log the outcome the store recorded (one line per job), and free the slot."""
        outcome = running.outcome
        assert outcome is not None
        error = outcome.error or {}
        if state == "succeeded":
            # The hot path: build the line only if it will be written.
            self.stats["succeeded"] += 1
            if logger.isEnabledFor(logging.INFO):
                logger.info("%s succeeded in %s", self._label(running), self._took(running))
            with self._lock:
                self._running.pop(job_id, None)
            self._send_outcome_signal(running, state)
            return
        label, took = self._label(running), self._took(running)
        if state == "cancelled":
            self.stats["cancelled"] += 1
            logger.warning(
                "%s cancelled (cancel requested while it ran; handler %s in %s)",
                label,
                outcome.status,
                took,
            )
        elif state == "scheduled":
            self.stats["retried"] += 1
            # This worker knows when its own retry falls due: claim it then, not at a poll.
            self._add_timer(outcome.delay_s)
            logger.warning(
                "%s failed in %s, retry in %.2f s: %s: %s",
                label,
                took,
                outcome.delay_s,
                error.get("type"),
                error.get("message"),
            )
        else:
            self.stats["dead"] += 1
            logger.error(
                "%s dead (%s) after %s: %s: %s",
                label,
                outcome.dead_reason,
                took,
                error.get("type"),
                error.get("message"),
            )
        with self._lock:
            self._running.pop(job_id, None)
        self._send_outcome_signal(running, state)

    def _send_outcome_signal(self, running: _Running, state: str) -> None:
        """Send the signal of a recorded outcome: the job's new ``state``, or "lost"."""
        assert running.outcome is not None
        send_outcome_signal(running.claimed, running.outcome, state, self.worker_id, self.using)

    # -- heartbeat and reaper --------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        tick = min(self.heartbeat_interval_s, self.reaper_interval_s)
        next_beat = time.monotonic() + self.heartbeat_interval_s
        next_reap = time.monotonic()
        next_prune = time.monotonic() + WORKER_PRUNE_INTERVAL_S
        outage = _OutageLog("heartbeat")
        hold = ReapHold(self.heartbeat_interval_s)
        try:
            while not self._heartbeat_stop.wait(tick):
                now = time.monotonic()
                try:
                    if now >= next_beat:
                        next_beat = now + self.heartbeat_interval_s
                        self._beat()
                        hold.ok()
                    if now >= next_reap and not self._stopping.is_set() and hold.may_reap():
                        next_reap = now + self.reaper_interval_s
                        retried, dead = self.store.reap(self._reap_decision)
                        if retried or dead:
                            logger.warning(
                                "reaper: %d expired lease(s) back to the queue, %d dead-lettered",
                                retried,
                                dead,
                            )
                    if now >= next_prune:
                        next_prune = now + WORKER_PRUNE_INTERVAL_S
                        gone = self.store.prune_workers(WORKER_ROW_RETENTION_S)
                        if gone:
                            logger.info(
                                "removed %d worker row(s) silent for over %.0f s",
                                gone,
                                WORKER_ROW_RETENTION_S,
                            )
                    outage.ok()
                except DatabaseError as exc:
                    outage.failed(exc)
                    hold.failed()
                    # Renew at the next tick, not a heartbeat interval later: after an outage
                    # the leases must be renewed before other workers' reapers resume.
                    next_beat = now
                    connections[self.using].close()
        finally:
            connections.close_all()

    def _service_loop(self, service: Service) -> None:
        outage = _OutageLog(service.name)
        try:
            # Services stop when claiming stops: a draining process must not fire cron for
            # work it will not do, nor take the leader lease from a process that stays.
            while not self._stopping.is_set():
                try:
                    service.run_once()
                    outage.ok()
                except DatabaseError as exc:
                    outage.failed(exc)
                    connections[self.using].close()
                except Exception:
                    # A bug in one service must not take the worker down; say so loudly.
                    logger.exception(
                        "%s failed; retrying in %.1f s", service.name, service.interval_s
                    )
                if self._stopping.wait(service.interval_s):
                    break
            stop = getattr(service, "stop", None)
            if stop is not None:
                try:
                    stop()
                except DatabaseError as exc:
                    logger.error("%s: could not stop cleanly: %s", service.name, exc)
        finally:
            connections.close_all()

    def _beat(self) -> None:
        with self._lock:
            held = {job_id: r for job_id, r in self._running.items()}
        leases = [(job_id, r.claimed.lease_token) for job_id, r in held.items()]
        with self._db_lock:
            kept = self.store.extend_leases(leases, self.lease_s)
        for job_id, running in held.items():
            lease = kept.get(job_id)
            if lease is not None:
                if lease.cancel_requested and not running.context.cancel_requested:
                    running.context.mark_cancel_requested()
                    logger.warning(
                        "%s: cancel requested; telling the handler", self._label(running)
                    )
            # A job whose outcome is in is being recorded (its ack may just have landed); only a
            # job still running has truly lost its lease.
            elif running.outcome is None and not running.context.lease_lost:
                running.context.mark_lease_lost()
                logger.warning(
                    "%s: lease lost (another worker or the reaper took the job); "
                    "its outcome will not be recorded",
                    self._label(running),
                )
        self.store.touch_worker(
            self.worker_id,
            running_jobs=len(held),
            status="draining" if self._stopping.is_set() else "running",
        )

    def _reap_decision(self, lease: ExpiredLease) -> ReapDecision:
        dead = lease.attempts >= lease.max_attempts
        delay = 0.0 if dead else backoff_for(lease.job_type, lease.attempts)
        return ReapDecision(id=lease.id, lease_token=lease.lease_token, dead=dead, delay_s=delay)

    # -- database trouble ------------------------------------------------------------------

    def _db_failed(self, exc: Exception, doing: str) -> None:
        self._db_failures += 1
        delay = min(0.5 * 2 ** (self._db_failures - 1), MAX_RECONNECT_DELAY_S)
        if self._db_failures == 1:
            logger.error("database unavailable while %s: %s; retrying", doing, exc)
        else:
            logger.debug("database still unavailable (%d): %s", self._db_failures, exc)
        connections[self.using].close()
        # Sleep, but wake for a stop signal.
        if self._stopping.wait(delay) and not self._force.is_set():
            return

    def _db_recovered(self) -> None:
        if self._db_failures:
            logger.warning("database is back after %d failed attempt(s)", self._db_failures)
            self._db_failures = 0

    # -- shutdown --------------------------------------------------------------------------

    def _shutdown(
        self, heartbeat: threading.Thread, service_threads: Sequence[threading.Thread] = ()
    ) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.stop()
        self._record_ready_outcomes()
        for job_id, running in list(self._running.items()):
            try:
                # The handler (if it still runs) is told: its outcome will not be recorded.
                running.context.mark_lease_lost()
                state = self.store.release(job_id, running.claimed.lease_token)
                if state == "cancelled":
                    self.stats["cancelled"] += 1
                    logger.warning(
                        "%s cancelled at shutdown (its cancel was requested)",
                        self._label(running),
                    )
                else:
                    self.stats["released"] += 1
                    logger.warning(
                        "%s released at shutdown (attempt not counted)", self._label(running)
                    )
            except LeaseLost:
                pass
            except DatabaseError as exc:
                logger.error(
                    "job %s: could not release (%s); it reruns when its lease expires", job_id, exc
                )
        self._abandoned = self._handlers.busy
        self._running.clear()
        self._heartbeat_stop.set()
        heartbeat.join(timeout=5)
        for thread in service_threads:
            thread.join(timeout=5)
        try:
            self.store.deregister_worker(self.worker_id)
        except DatabaseError as exc:
            logger.error("could not deregister worker %s: %s", self.worker_id, exc)
        connections.close_all()
        logger.info(
            "worker %s stopped: %s",
            self.worker_id,
            ", ".join(f"{k} {v}" for k, v in self.stats.items()),
        )

    @property
    def abandoned_jobs(self) -> int:
        """Return how many handlers were still running at exit (their leases were released)."""
        return getattr(self, "_abandoned", 0)
