"""Internal: ``runworkers --processes N``: start N worker processes, restart the ones that die.

The supervisor itself touches no database. Given a ``relay``, it forks one more process that
does: it LISTENs once for all the workers and hands each notification to them through a pipe
per slot (``handoff.py``); a relay that dies is restarted after :data:`RELAY_RESTART_S`.

It forks each worker (so Django is set up once, and a child starts in milliseconds), watches them,
and restarts a child that died. A child that died before it served (its first claim statement had
not returned: ``served.py``) is restarted after a backoff that grows while its slot keeps dying so,
so a crash loop at start-up does not spin; a child that served is replaced at once, however young
(issue 32: a worker killed from outside, by the OOM killer, an eviction or an operator, is not a
crash loop, and the backoff had idled whole fleets under repeated kills). A child that exits with
:data:`EXIT_RECYCLE` (its handler ran past its timeout and its thread could not be stopped, or it
finished its ``--max-tasks``) is replaced at once. Deaths are named and counted by cause
(``causes.py``: a signal, an exit status, or the OOM killer when the kernel says so) in the log
and, through ``record_death``, in the metrics.

A child that dies (killed, or exiting with an error) may leave leases behind. When given a
``hand_back`` callable, the supervisor forks a short-lived process that runs it with the dead
child's worker id (``worker/deaths.py``: the one job of a child that ran one is charged, the
jobs of a child that ran several are refunded and run alone next), and restarts the slot only
once that process has ended. The supervisor itself still touches no database.

Stopping (``worker/stopping.py``): the supervisor counts the SIGTERMs it receives. The first
is passed on to every child as :data:`~jobqueue.worker.stopping.DRAIN_SIGNAL` (each drains
within its grace period); a second one, or SIGINT, as
:data:`~jobqueue.worker.stopping.FORCE_SIGNAL` (release at once). Children treat SIGTERM as a
drain however often it comes, so a SIGTERM sent to the whole process group drains exactly like
one sent to the supervisor alone.

A single worker process (no ``--processes``) recycles itself in place instead: :func:`reexec`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from django.db import connections

from jobqueue.worker.causes import DeathCauses
from jobqueue.worker.served import ServedFlags
from jobqueue.worker.stopping import DRAIN_SIGNAL, FORCE_SIGNAL, SUPERVISED, record_cause

logger = logging.getLogger("jobqueue.supervisor")

#: A worker's exit status asking to be replaced now (not a crash: no restart backoff).
EXIT_RECYCLE = 3

#: First restart delay of a slot whose process died before it served, seconds; doubles per
#: such death in a row. A process that served is replaced at once (and resets the slot's count).
RESTART_BACKOFF_BASE_S = 0.5
#: Longest restart delay, seconds.
RESTART_BACKOFF_CAP_S = 30.0
#: How long after the stop signal's grace period children get before SIGKILL, seconds.
KILL_AFTER_GRACE_S = 10.0
#: Longest a hand-back process may run before it is killed (its leases then expire), seconds.
HAND_BACK_TIMEOUT_S = 30.0
#: How long after the relay process died it is restarted, seconds (its workers poll meanwhile).
RELAY_RESTART_S = 1.0


@dataclass(slots=True)
class _Slot:
    index: int
    pid: int | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    done: bool = False
    restarts: int = 0
    worker_id: str = ""
    #: The process handing back the leases of this slot's dead child, and its deadline.
    hand_back_pid: int | None = None
    hand_back_until: float = 0.0
    #: Why its last child died (``causes.py``), for the hand-back process to record.
    cause: str = ""


def _terminate_with_parent() -> None:
    """Ask Linux to send this process the drain signal when its parent (the supervisor) dies.

    A supervisor killed with SIGKILL then leaves no orphans running: each worker drains and
    exits as on a deploy. Elsewhere this is a no-op.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, DRAIN_SIGNAL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Supervisor:
    """Run ``processes`` worker processes and keep them running.

    Args:
        processes: how many worker processes (>= 1).
        run_worker: ``run_worker(slot, worker_id)``, called in each forked child; returns the
            child's exit status. It builds and runs a :class:`~jobqueue.worker.Worker` holding
            its leases under ``worker_id`` (it must not return into the supervisor).
        grace_s: the workers' grace period, seconds; the supervisor waits that long plus
            :data:`KILL_AFTER_GRACE_S` for children to exit after SIGTERM before killing them.
        worker_id_for: ``worker_id_for(slot, pid, nonce)`` names a child of a slot by its own
            pid: called in the child and in the supervisor after the fork with the same
            ``nonce`` (drawn before it), so both agree and the supervisor knows whose leases a
            dead child held.
        hand_back: ``hand_back(worker_id, cause)``, run in a forked process after a child died
            to hand back its leases (``cause`` as ``causes.py`` names it); None leaves them to
            expire.
        record_death: ``record_death(cause)``, run in that same forked process after the
            hand-back, to count the death by cause where the metrics read it (the supervisor
            itself touches no database); None counts them in the log only.
        relay: ``relay({slot: write fd})``, run in a forked process for as long as the
            supervisor runs (restarted if it dies): it wakes each slot's worker by writing to
            that slot's pipe, whose read end the worker finds with :meth:`wake_fd`. None: each
            worker listens for itself.

    Raises:
        ValueError: ``processes`` is below 1.
    """

    def __init__(
        self,
        *,
        processes: int,
        run_worker: Callable[[int, str], int],
        grace_s: float,
        worker_id_for: Callable[[int, int, str], str],
        hand_back: Callable[[str, str], object] | None = None,
        record_death: Callable[[str], object] | None = None,
        relay: Callable[[Mapping[int, int]], int] | None = None,
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.slots = [_Slot(index=i) for i in range(processes)]
        self.run_worker = run_worker
        self.worker_id_for = worker_id_for
        self.hand_back = hand_back
        self.record_death = record_death
        #: Whether each slot's child has served (shared memory: ``served.py``).
        self.served = ServedFlags(processes)
        #: Deaths by cause (``causes.py``).
        self.causes = DeathCauses()
        self.grace_s = grace_s
        self._stop_signal: int | None = None
        self._stop_deadline: float | None = None
        #: (signal to send the children, the signal received that asks for it), in order.
        self._forward: list[tuple[int, int]] = []
        self.relay = relay
        #: slot -> (read end, write end) of its wake-up pipe, while there is a relay.
        self._pipes: dict[int, tuple[int, int]] = {}
        self._relay_pid: int | None = None
        self._relay_restart_at: float | None = None

    def wake_fd(self, slot: int) -> int | None:
        """Return the read end of ``slot``'s wake-up pipe (in its worker), or None: no relay."""
        pipe = self._pipes.get(slot)
        return None if pipe is None else pipe[0]

    # -- the relay ----------------------------------------------------------------------------

    def _spawn_relay(self) -> None:
        assert self.relay is not None
        connections.close_all()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISED.handled)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for signum in SUPERVISED.handled:
                    signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                for read, _ in self._pipes.values():
                    os.close(read)
                code = self.relay({slot: write for slot, (_, write) in self._pipes.items()})
            except BaseException:
                logger.exception("the relay process %d crashed", os.getpid())
            finally:
                logging.shutdown()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self._relay_pid = pid
        self._relay_restart_at = None
        logger.info("started the relay process %d (one listener for the workers)", pid)

    def _stop_relay(self) -> None:
        pid, self._relay_pid = self._relay_pid, None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        for read, write in self._pipes.values():
            os.close(read)
            os.close(write)
        self._pipes.clear()

    # -- signals ----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: object) -> None:
        # The same policy as a supervised child's, except that SIGTERM escalates here: this is
        # the one place that counts SIGTERMs.
        force = signum in SUPERVISED.force or (
            signum == signal.SIGTERM and self._stop_signal is not None
        )
        if force:
            if self._stop_signal != FORCE_SIGNAL:
                self._stop_signal = FORCE_SIGNAL
                self._forward.append((FORCE_SIGNAL, signum))
        elif self._stop_signal is None:
            self._stop_signal = DRAIN_SIGNAL
            self._forward.append((DRAIN_SIGNAL, signum))

    def _send(self, signum: int) -> None:
        for slot in self.slots:
            if slot.pid is not None:
                try:
                    os.kill(slot.pid, signum)
                except ProcessLookupError:
                    pass

    # -- children -----------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        # A connection opened before the fork (system checks can open one) must not be shared
        # by parent and child.
        connections.close_all()
        # The child is born with the stop signals blocked; its worker unblocks them once its
        # handlers are in place, so a stop sent in between is held, not lost or fatal.
        nonce = uuid.uuid4().hex[:6]
        self.served.reset(slot.index)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISED.handled)
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for signum in SUPERVISED.handled:
                    signal.signal(signum, signal.SIG_DFL)
                _terminate_with_parent()
                for index, (read, write) in self._pipes.items():
                    # Its own pipe's read end only: a write end held here would keep a pipe
                    # open after the relay died.
                    os.close(write)
                    if index != slot.index:
                        os.close(read)
                self.served.install(slot.index)
                worker_id = self.worker_id_for(slot.index, os.getpid(), nonce)
                code = self.run_worker(slot.index, worker_id)
            except BaseException:
                logger.exception("worker process %d crashed", os.getpid())
            finally:
                logging.shutdown()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        slot.worker_id = self.worker_id_for(slot.index, pid, nonce)
        slot.pid = pid
        slot.started = time.monotonic()
        slot.restart_at = None
        logger.info("started worker process %d (slot %d, %s)", pid, slot.index, slot.worker_id)

    def _start_hand_back(self, slot: _Slot) -> None:
        connections.close_all()
        # Born with the stop signals blocked: it is short, and a stop must not cut it off.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISED.handled)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if self.hand_back is not None:
                    self.hand_back(slot.worker_id, slot.cause)
                code = 0
            except BaseException:
                logger.exception(
                    "could not hand back the leases of %s; they expire by themselves",
                    slot.worker_id,
                )
            try:
                if self.record_death is not None:
                    self.record_death(slot.cause)
            except BaseException:
                logger.exception("could not count the death of %s", slot.worker_id)
            finally:
                logging.shutdown()
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        slot.hand_back_pid = pid
        slot.hand_back_until = time.monotonic() + HAND_BACK_TIMEOUT_S

    def _reap_children(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self._relay_pid:
                self._relay_pid = None
                if self._stop_signal is not None:
                    # A stop sent to the whole process group reached it too.
                    logger.info("the relay process %d ended", pid)
                    continue
                self._relay_restart_at = time.monotonic() + RELAY_RESTART_S
                logger.error(
                    "the relay process %d ended (%s); restarting it in %.0f s (the workers "
                    "poll every second meanwhile)",
                    pid,
                    self.causes.cause(status),
                    RELAY_RESTART_S,
                )
                continue
            helper = next((s for s in self.slots if s.hand_back_pid == pid), None)
            if helper is not None:
                helper.hand_back_pid = None
                continue
            slot = next((s for s in self.slots if s.pid == pid), None)
            if slot is None:
                continue
            self._exited(slot, status)

    def _exited(self, slot: _Slot, status: int) -> None:
        slot.pid = None
        lived = time.monotonic() - slot.started
        served = self.served.served(slot.index)
        if os.WIFSIGNALED(status):
            code = -os.WTERMSIG(status)
        else:
            code = os.WEXITSTATUS(status)
        dead = code not in (0, EXIT_RECYCLE)
        if dead:
            slot.cause = self.causes.cause(status)
            how = (
                f"died ({slot.cause}: the kernel's OOM killer)"
                if slot.cause == "OOM"
                else f"killed by {slot.cause}"
                if code < 0
                else f"exited with status {code}"
            )
            if self.hand_back is not None or self.record_death is not None:
                # Draining too: a child killed meanwhile (OOM, kill -9, or by us after the
                # grace) left leases that would otherwise wait out their expiry and be charged.
                self._start_hand_back(slot)
        else:
            how = f"exited with status {code}"
        if self._stop_signal is not None:
            slot.done = True
            logger.info("worker process of slot %d %s", slot.index, how)
            return
        if code == 0:
            # A burst worker that drained its queues: nothing to restart.
            slot.done = True
            logger.info("worker process of slot %d finished", slot.index)
            return
        if code == EXIT_RECYCLE:
            slot.restart_at = time.monotonic()
            logger.warning(
                "worker process of slot %d recycled (a job overran, or it reached --max-tasks or "
                "--max-memory-per-child); replacing it",
                slot.index,
            )
            return
        if served:
            # It started and claimed: killed from outside, or a job took it down (the hand-back
            # charges that job). Not a crash loop: its slot comes back at once.
            slot.quick_deaths = 0
            delay = 0.0
            why = "it had served: replacing it now"
        else:
            slot.quick_deaths += 1
            delay = min(
                RESTART_BACKOFF_CAP_S, RESTART_BACKOFF_BASE_S * 2 ** max(slot.quick_deaths - 1, 0)
            )
            why = (
                f"before it served ({slot.quick_deaths} such death(s) in a row); "
                f"restarting in {delay:.1f} s"
            )
        slot.restart_at = time.monotonic() + delay
        logger.error(
            "worker process of slot %d %s after %.1f s, %s; deaths by cause: %s",
            slot.index,
            how,
            lived,
            why,
            self.causes.summary(),
        )

    def _kill_late_hand_backs(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.hand_back_pid is not None and now > slot.hand_back_until:
                logger.error("handing back the leases of %s timed out", slot.worker_id)
                try:
                    os.kill(slot.hand_back_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                slot.hand_back_until = float("inf")  # reaped by _reap_children

    # -- main loop ------------------------------------------------------------------------------

    def run(self) -> int:
        """Start the workers and supervise them until they are stopped. Returns 0."""
        record_cause(0)  # nothing passed on yet (a previous supervisor in this process)
        for signum in SUPERVISED.handled:
            signal.signal(signum, self._on_signal)
        # `runworkers` holds SIGTERM from the start of Django's set-up (stopping.py): a stop sent
        # since then is handled now, as a drain of children that have claimed nothing.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SUPERVISED.handled)
        if self.relay is not None:
            self._pipes = {slot.index: os.pipe() for slot in self.slots}
            self._spawn_relay()
        try:
            self._supervise()
        finally:
            self._stop_relay()
        logger.info("supervisor stopped")
        return 0

    def _supervise(self) -> None:
        for slot in self.slots:
            self._spawn(slot)
        while True:
            while self._forward:
                signum, cause = self._forward.pop(0)
                logger.warning(
                    "%s: %s: passing it on to %d worker process(es)",
                    signal.Signals(cause).name,
                    "drain" if signum == DRAIN_SIGNAL else "release now",
                    sum(s.pid is not None for s in self.slots),
                )
                record_cause(cause)  # the children name it in their logs (stopping.py)
                self._send(signum)
                if self._stop_deadline is None:
                    self._stop_deadline = time.monotonic() + self.grace_s + KILL_AFTER_GRACE_S
            self._reap_children()
            self._kill_late_hand_backs()
            running = [s for s in self.slots if s.pid is not None]
            if self._stop_signal is not None:
                if not running and all(s.hand_back_pid is None for s in self.slots):
                    break
                if self._stop_deadline is not None and time.monotonic() > self._stop_deadline:
                    logger.error("worker processes outlived their grace period; killing them")
                    self._send(signal.SIGKILL)
            else:
                now = time.monotonic()
                for slot in self.slots:
                    if (
                        slot.pid is None
                        and slot.hand_back_pid is None  # the replacement may reuse the id
                        and slot.restart_at is not None
                        and now >= slot.restart_at
                    ):
                        slot.restarts += 1
                        self._spawn(slot)
                if all(s.done for s in self.slots):
                    break
                if (
                    self._relay_restart_at is not None
                    and now >= self._relay_restart_at
                    and self._relay_pid is None
                ):
                    self._spawn_relay()
            time.sleep(0.1)


def reexec(argv: Sequence[str]) -> NoReturn:
    """Replace this process with a fresh run of ``argv``: same pid, no threads, no leases.

    How a single worker process (no supervisor) recycles itself: the exec ends the runaway
    handler threads that nothing else can stop, and a service manager watching the pid sees
    no exit. Call it only after the worker has released its leases and closed its connections.

    Args:
        argv: the command line to run, ``argv[0]`` included (``sys.orig_argv``, so interpreter
            options such as ``-m django`` come back too); run by ``sys.executable``.

    Raises:
        Nothing: if the exec fails, the process exits with :data:`EXIT_RECYCLE` instead, for a
        service manager to restart it.
    """
    logger.warning("recycling this process in place: re-running %s", " ".join(argv))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, list(argv))
    except OSError as exc:
        sys.stderr.write(f"jobqueue: could not re-run this worker ({exc}); exiting\n")
        sys.stderr.flush()
    os._exit(EXIT_RECYCLE)
