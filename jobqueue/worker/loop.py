"""Internal: the worker's loop. Claims jobs, starts them on handler threads, stops.

Threads, and what each one owns:

* the main thread (:meth:`Worker.run`): the claim loop, and recording every outcome (through
  the completer, ``completer.py``) on its own connection, so handler threads never pay for a
  connection of ours;
* handler threads (``jobqueue/worker/threads.py``): run one job each, then close their Django
  connections the way a request does (``close_old_connections``); one per slot, plus one per
  handler still running past its timeout, never more than twice ``--concurrency``: when such
  runaways outgrow their half, the process recycles;
* the maintenance thread (``services.py``): the heartbeat (``heartbeat.py``: every lease/3,
  one statement extends all the leases the process holds), the reaper (``reaper.py``) and the
  pruning of dead workers' rows (``rows.py``);
* the services the worker is given (``services.start_services``: the cron scheduler joins the
  maintenance thread, the pruner has its own);
* on PostgreSQL with ``LISTEN_NOTIFY``, the listener thread (``store/notify.py``): wakes the claim
  loop (``wakeups.py``) when one of its queues got ready jobs, so an idle worker claims at once
  instead of at its next poll.

Stopping: the first SIGTERM stops claiming and lets running jobs finish for ``grace_s`` seconds
while heartbeats go on; then, or at once on SIGINT or a second SIGTERM, the leases of jobs still
running are released back to ``ready`` without spending their attempt. Under the supervisor the
signals mean what ``jobqueue/worker/stopping.py`` says (a group-wide SIGTERM drains once).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence

from django.db import DatabaseError, connections

from jobqueue.errors import LeaseLost
from jobqueue.limits.fairness import QueueSelector, rate_limits
from jobqueue.limits.policy import claim_policy
from jobqueue.maintenance.pruning import WorkerRowPruner, record_recycle
from jobqueue.maintenance.reaper import Reaper
from jobqueue.maintenance.services import Service, ServiceRunner, start_services
from jobqueue.settings.conf import get_settings
from jobqueue.store import get_store
from jobqueue.store.interface import ClaimRequest
from jobqueue.store.pooler import listen_alias
from jobqueue.worker.claiming import Claimer
from jobqueue.worker.completer import Completer
from jobqueue.worker.guard import DependencyGuard
from jobqueue.worker.heartbeat import Heartbeat
from jobqueue.worker.listening import ListenerHealth
from jobqueue.worker.memory import MemoryLimit
from jobqueue.worker.outage import DatabaseBackoff, ReapHold
from jobqueue.worker.quota import TaskQuota
from jobqueue.worker.ratewake import rate_wake
from jobqueue.worker.runs import Run, Runs
from jobqueue.worker.solo import SoloGate
from jobqueue.worker.stalls import StallReporter
from jobqueue.worker.starting import Starter
from jobqueue.worker.stopping import STANDALONE, Stops, StopSignals
from jobqueue.worker.supervisor import EXIT_RECYCLE
from jobqueue.worker.wakeups import WakeUps

logger = logging.getLogger("jobqueue.worker")


class Worker:
    """A worker process's loops. Build it, then call :meth:`run` (blocking).

    Args:
        queues: queue names to claim from; a last ``"*"``: every other queue, now and later.
        weights: one weight per queue (default all 1): saturated queues are served in
            proportion (see ``jobqueue/limits/fairness.py``).
        exclude_queues: queues ``"*"`` leaves out.
        max_tasks: finish at most this many jobs, then stop claiming and drain (``quota.py``).
        wake_fd: under the supervisor with a relay (``handoff.py``), the read end of this
            process's pipe: wake-ups come from there, not from a listening connection of its
            own (the relay LISTENs for the host, or polls where nobody can).
        sharing: with ``wake_fd``, how many processes share the relay: an idle one polls that
            many times less often while the relay is up, and reaps expired leases that many
            times less often (the host as a whole as often as one process did).
        strict: serve queues in list order instead: a queue only when those before it have no
            claimable job.
        concurrency: sync jobs run at once (threads), >= 1.
        async_concurrency: ``async def`` jobs run at once on the worker's event loop
            (``eventloop.py``), >= 1; default ``JOBQUEUE["ASYNC_CONCURRENCY"]``.
        lease_s: lease length, seconds; heartbeats every third of it.
        poll_interval_s: longest idle wait between claims, seconds.
        grace_s: how long running jobs may finish after the first SIGTERM, seconds.
        reaper_interval_s: how often expired leases are reclaimed, seconds.
        burst: exit once no job is claimable and none is running.
        worker_id: the name leases are held under; default :func:`default_worker_id`.
        using: database alias of the queue.
        install_signal_handlers: handle the stop signals (only possible in the main thread).
        stop_signals: what each stop signal means (``jobqueue/worker/stopping.py``): ``STANDALONE``
            (default) or, under the supervisor, ``SUPERVISED``.
        listen_notify: wake on PostgreSQL notifications (default ``JOBQUEUE["LISTEN_NOTIFY"]``);
            always off on other databases, where the worker polls.
        services: background loops to run beside the claim loop while the worker claims
            (``run_once`` every ``interval_s``; where: ``services.start_services``); default none.
        recycle_on_overrun: recycle at the first handler that runs past its timeout, not
            only when such runaways outnumber ``concurrency`` (``jobqueue/worker/threads.py``).
            Either way the worker stops claiming, drains, and :meth:`run` returns
            :data:`~jobqueue.worker.supervisor.EXIT_RECYCLE`: the process must end (the supervisor
            replaces it) for the runaway threads to end. Set under ``--processes``.
        max_memory_mb: recycle the same way once the process's resident memory passes this
            many MB (MiB), checked after each job that ends (``memory.py``); None: never.
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
        exclude_queues: Sequence[str] = (),
        max_tasks: int | None = None,
        wake_fd: int | None = None,
        sharing: int = 1,
        async_concurrency: int | None = None,
        max_memory_mb: int | None = None,
    ) -> None:
        conf = get_settings()
        self.queues = list(queues)
        caps, limits = claim_policy(conf)
        self.selector = QueueSelector(
            self.queues,
            weights,
            strict=strict,
            caps=caps,
            limits=limits,
            exclude=exclude_queues,
            rates=rate_limits(),
        )
        self.concurrency = concurrency or conf.concurrency
        self.async_concurrency = async_concurrency or conf.async_concurrency
        self.lease_s = lease_s or conf.lease_seconds
        self.poll_interval_s = poll_interval_s or conf.poll_interval_seconds
        self.grace_s = conf.grace_seconds if grace_s is None else grace_s
        self.reaper_interval_s = reaper_interval_s or conf.reaper_interval_seconds
        if wake_fd is not None:
            # The host reaps about as often as one process did (the reaper's work is the
            # database's, not this process's).
            self.reaper_interval_s *= max(sharing, 1)
        self.burst = burst
        self.worker_id = worker_id or default_worker_id()
        self.using = using or "default"
        self.install_signal_handlers = install_signal_handlers
        self.stop_signals = stop_signals
        self.services = list(services or [])
        self.recycle_on_overrun = recycle_on_overrun
        self._recycle = False
        #: Why the worker recycles itself (a ``RECYCLE_REASONS`` entry), once it does.
        self._recycle_reason: str | None = None
        self._memory = MemoryLimit(max_memory_mb)
        #: What :meth:`run` returned, once it has.
        self.exit_code: int | None = None
        self.heartbeat_interval_s = self.lease_s / 3
        self.store = get_store(self.using)
        # Circuit breakers and retry budgets: two hooks, after the claim and in the completer.
        self._guard = DependencyGuard(self.store, self.lease_s)
        # A suspect job (its process died beside others) runs alone: a hook in _claim.
        self._solo = SoloGate()
        self.listen_on = listen_alias(self.using)  # never through a pooler (store/pooler.py)
        self.listen_notify = (
            conf.listen_notify if listen_notify is None else listen_notify
        ) and connections[self.using].vendor == "postgresql"
        self._runs = Runs()
        self._wakeups = WakeUps()
        # The listener (if any) and its health: fast polling while down, its state on our row.
        # Its connection never goes through a pooler (store/pooler.py): none, then poll only.
        self._listener = ListenerHealth(
            self.store,
            self.worker_id,
            self.listen_on or self.using,
            # Under the supervisor its relay listens for it, or polls where none can LISTEN.
            (self.listen_notify and self.listen_on is not None) or wake_fd is not None,
            handoff_fd=wake_fd,
            sharing=sharing,
        )
        self._listener.attach(self.selector.serves, self._wakeups.wake)
        self._stops = Stops(stop_signals, self._wakeups, self._runs.__len__, self.grace_s)
        self._stopping, self._force = self._stops.stopping, self._stops.force
        self._maintenance_stop = threading.Event()
        # Held around multi-row writes on this process's own leases (heartbeat, acks), so two
        # of our connections never lock the same rows in different orders (no deadlock).
        db_lock = threading.Lock()
        self._backoff = DatabaseBackoff(self.using, self._stopping)
        # The first statement of another thread that works after an outage (the listener's
        # reconnect, a service's round) ends the claim loop's backoff pause (issue 32).
        self._listener.on_up = self._backoff.answered
        self.stats = dict.fromkeys(("succeeded", "retried", "dead", "cancelled", "lost"), 0)
        self.stats["released"] = 0
        #: The ``max_tasks`` count (``quota.py``); it caps every claim.
        self.quota = TaskQuota(max_tasks, self.stats, self._runs.__len__, self.stop)
        #: Records outcomes (``completer.py``).
        self.completer = Completer(
            self.store,
            self._runs,
            worker_id=self.worker_id,
            using=self.using,
            concurrency=self.concurrency,
            guard=self._guard,
            db_lock=db_lock,
            wakeups=self._wakeups,
            stopping=self._stopping,
            stats=self.stats,
            on_db_error=self._backoff.failed,
        )
        self._starter = Starter(
            self._runs,
            self.completer,
            worker_id=self.worker_id,
            concurrency=self.concurrency,
            on_runaway=self._recycle_if_runaways,
            async_concurrency=self.async_concurrency,
            hold_async_s=self.poll_interval_s,
            # Queues it names (not those "*" finds): one whose registered types are all
            # async makes the claims fill the loop from the first one (starting.py).
            serves=self.queues.__contains__,
        )
        self._handlers = self._starter.threads
        self._claimer = Claimer(
            self.store,
            self.selector,
            worker_id=self.worker_id,
            lease_s=self.lease_s,
            wakeups=self._wakeups,
            backoff=self._backoff,
            guard=self._guard,
            solo=self._solo,
            running=self._runs,
            starter=self._starter,
        )
        #: The maintenance services, run by one runner on one thread (or by :meth:`run_once`).
        self.heartbeat = Heartbeat(
            self.store,
            self._runs,
            worker_id=self.worker_id,
            lease_s=self.lease_s,
            db_lock=db_lock,
            stopping=self._stopping,
        )
        # The first round that works after failures also ends the claim loop's backoff pause.
        hold = ReapHold(self.heartbeat_interval_s, on_back=self._backoff.answered)
        self.reaper = Reaper(
            self.store, interval_s=self.reaper_interval_s, hold=hold, stopping=self._stopping
        )
        self._maintenance = ServiceRunner(
            [
                self.heartbeat,
                self.reaper,
                WorkerRowPruner(self.store),
                self._listener,
                StallReporter(self._starter.stalls, using=self.using),
            ],
            name="heartbeat",
            using=self.using,
            stop=self._maintenance_stop,
            first_at_once=False,
            watcher=hold,
        )

    # -- control ---------------------------------------------------------------------------

    def stop(self, *, force: bool = False) -> None:
        """Stop claiming; with ``force``, also release running jobs now instead of after grace."""
        self._stops.stop(force=force)

    @property
    def stop_requested(self) -> bool:
        """Return whether SIGTERM or SIGINT reached this worker (a stop wins over a recycle)."""
        return self._stops.signalled

    @property
    def running_jobs(self) -> int:
        """Return how many jobs this worker is running (or recording) now."""
        return len(self._runs)

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or, with ``burst``, until the queues are drained).

        Returns:
            The process exit status: 0, or :data:`~jobqueue.worker.supervisor.EXIT_RECYCLE` when the
            worker stopped itself to be recycled (and no stop signal came meanwhile). Handler
            threads still running at the end are abandoned (their leases released): the caller
            should end the process.
        """
        if self.install_signal_handlers and threading.current_thread() is threading.main_thread():
            self._stops.install()
        self._register()
        # Services stop when claiming stops: a draining process must not fire cron for work
        # it will not do, nor take the leader lease from a process that stays.
        service_threads = start_services(
            self.services, self._maintenance, using=self.using, stopping=self._stopping
        )
        maintenance = self._maintenance.thread()
        maintenance.start()
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
            self._shutdown(maintenance, service_threads)
        if self._recycle and not self._stops.signalled:
            return EXIT_RECYCLE
        return 0

    def run_once(self) -> int:
        """Run one pass of the worker on the calling thread: for tests and embedding.

        Claims as many jobs as free slots allow (none while outcomes wait to be recorded),
        starts them on handler threads, waits until every run has an outcome (or passed its
        ``timeout_s``), records the outcomes, and runs the maintenance services that are due
        (heartbeat, reaper, pruning of dead workers' rows) while it waits and once at the end,
        so a long run keeps its lease. No signal handler is installed, no
        thread of ours but the handler threads is started, and the worker's row is not
        registered (:meth:`run` does that). A database error is logged and backed off from,
        as in :meth:`run`; the outcomes it left are recorded by the next call.

        Returns:
            How many runs ended in this pass: recorded (succeeded, retried, dead, cancelled)
            or discarded because their lease was lost.
        """
        free = self._free_slots()
        if free > 0 and not self.completer.unflushed:
            self._claimer.claim(free)
        ended = 0
        while True:
            self._starter.enforce_timeouts()
            ended += self.completer.record_ready()
            if not self._runs or self.completer.unflushed:
                break
            # A long run keeps its lease: the heartbeat is due here too, not on a thread.
            self._maintenance.run_due()
            self._wait(self.poll_interval_s)
        self._maintenance.run_due()
        return ended

    def _register(self) -> None:
        queues, beat_s = self.selector.advertised(), self.heartbeat_interval_s
        while not self._stopping.is_set():
            try:
                self.store.register_worker(self.worker_id, queues, self.concurrency, beat_s)
                self._backoff.recovered()
                return
            except DatabaseError as exc:
                self._backoff.failed(exc, "registering")

    def _loop(self) -> None:
        deadline: float | None = None
        while True:
            self._starter.enforce_timeouts()
            claim_began = time.monotonic()  # a limiter drained then holds jobs (rate_wake)
            if self.completer.record_ready(self._claim_after):
                self._recycle_if_grown()
            # A claim that went with the outcomes' write (one round trip): start what it took.
            made = self.completer.take_claimed()
            asked, claimed = 0, None
            if made is not None:
                asked = made[0].max_jobs
                claimed = self._claimer.took(made[1], asked)
            self.quota.check()
            if self._stopping.is_set():
                if deadline is None:
                    deadline = time.monotonic() + self.grace_s
                if not self._runs or self._force.is_set() or time.monotonic() >= deadline:
                    return
                self._wait(min(0.2, max(deadline - time.monotonic(), 0.0)))
                continue
            if made is None:
                free = self._free_slots()
                # A claim only when it may take something (claiming.py: an idle worker's
                # polls and the claim after a lone ack ask the store first).
                if free > 0 and not self.completer.unflushed:
                    if self._claimer.needed():
                        asked, claimed = free, self._claimer.claim(free)
                    elif self.burst and not self._runs:
                        return  # no ready or scheduled job in its queues, none running
            if asked:
                if claimed is None:
                    continue
                if claimed and len(claimed) == asked:
                    continue
                since_s = time.monotonic() - claim_began  # --burst waits for held-back jobs
                held = rate_wake(
                    self.store, self.selector.rates, self._wakeups, self.poll_interval_s, since_s
                )
                if self.burst and not claimed and not self._runs and not held:
                    return
            self._wait(self._listener.idle_wait_s(self.poll_interval_s))

    def _free_slots(self, ending: list[Run] | None = None) -> int:
        # Claim for free slots only (no local buffer): threads never past their cap, the event
        # loop's if it runs async jobs (starting.py); a suspect job runs alone. ``ending``: runs
        # whose outcomes are being recorded now.
        free = self._starter.free(ending or [])
        return self.quota.cap(self._solo.claim_size(free, self._runs))

    def _claim_after(self, ending: list[Run]) -> ClaimRequest | None:
        """The claim to send with the write ending ``ending`` runs (None: stopping, max_tasks)."""
        if self._stopping.is_set() or self.quota.max_tasks is not None:
            return None
        if not self._claimer.riding():
            return None  # the last claim found nothing more; the loop asks after the write
        free = self._free_slots(ending)
        return self._claimer.request(free) if free > 0 else None

    def _wait(self, timeout: float) -> None:
        """Sleep until an outcome, a wake-up or a stop comes, a deadline passes, or ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            deadlines = [r.deadline for r in self._runs.values() if r.outcome is None]
            closes_at = self.completer.closes_at()
            if closes_at is not None:
                deadlines.append(closes_at)
            timer = self._wakeups.next_timer()
            if timer is not None and self._starter.free() > 0:
                if not self._stopping.is_set():
                    # (With every slot busy, the claim after the next outcome serves it.)
                    deadlines.append(timer)
            # Wake in time to fail a job at its hard limit (not a poll interval later), to
            # record outcomes when their batch window closes, and to claim a delayed job when
            # it falls due.
            wait = max(min([end, *deadlines]) - time.monotonic(), 0.001)
            if not self._wakeups.wait(wait):
                return
            if (
                self.completer.has_arrivals()
                or self._wakeups.claim_pending
                or self._stopping.is_set()
            ):
                return
            # Only a new timer: sleep again, until the soonest deadline.

    def _recycle_if_runaways(self) -> None:
        """Stop claiming and recycle once runaway handlers pass their share of the threads."""
        runaways = self._handlers.runaways
        # Up to `concurrency` runaways cost no capacity; one more and a slot has no thread.
        limit = 1 if self.recycle_on_overrun else self.concurrency + 1
        if runaways < limit or self._stopping.is_set():
            return
        self._recycle, self._recycle_reason = True, "overrun"
        logger.warning(
            "recycling this process: %d handler(s) still running past their timeout; no new "
            "claims; running jobs get %.0f s, then a fresh process replaces this one",
            runaways,
            self.grace_s,
        )
        self.stop()

    def _recycle_if_grown(self) -> None:
        """Stop claiming and recycle once resident memory passes ``max_memory_mb`` (after a job)."""
        if self._stopping.is_set():
            return
        resident_mb = self._memory.exceeded()
        if resident_mb is None:
            return
        self._recycle, self._recycle_reason = True, "memory"
        logger.warning(
            "recycling this process: resident memory %.0f MB is over --max-memory-per-child %d "
            "MB; no new claims; %d running job(s) get %.0f s, then a fresh process replaces "
            "this one",
            resident_mb,
            self._memory.max_mb,
            len(self._runs),
            self.grace_s,
        )
        self.stop()

    # -- shutdown --------------------------------------------------------------------------

    def _shutdown(
        self, maintenance: threading.Thread, service_threads: Sequence[threading.Thread] = ()
    ) -> None:
        self._stopping.set()
        self._listener.stop()
        self.completer.record_ready()
        release_runs(self.store, self._runs, self.stats)
        # Released runs' tasks are cancelled (their contexts told them); end the loop too.
        self._abandoned = self._handlers.busy + self._starter.loop.close()
        self._runs.clear()
        self._maintenance_stop.set()
        maintenance.join(timeout=5)
        for thread in service_threads:
            thread.join(timeout=5)
        try:
            if not self._stops.signalled and (self._recycle or self.quota.spent):
                # jobqueue_worker_recycles_total{reason}
                reason = (self._recycle_reason or "overrun") if self._recycle else "max_tasks"
                record_recycle(reason, using=self.using)
            self.store.deregister_worker(self.worker_id)
        except DatabaseError as exc:
            logger.error("could not deregister worker %s: %s", self.worker_id, exc)
        connections.close_all()
        counts = ", ".join(f"{k} {v}" for k, v in self.stats.items())
        logger.info("worker %s stopped: %s", self.worker_id, counts)

    @property
    def abandoned_jobs(self) -> int:
        """Return how many handlers were still running at exit (their leases were released)."""
        return getattr(self, "_abandoned", 0)


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


def default_worker_id(pid: int | None = None, nonce: str | None = None) -> str:
    """Return ``host:pid:random`` — unique even when a restarted container reuses host and pid.

    Args:
        pid: the process that will hold the leases; default this one. The supervisor names a
            child by the child's pid, so ``leased_by`` points at the process to signal.
        nonce: the random part; default 6 fresh hex digits.
    """
    pid = os.getpid() if pid is None else pid
    nonce = uuid.uuid4().hex[:6] if nonce is None else nonce
    return f"{socket.gethostname()}:{pid}:{nonce}"
