"""Internal: how a worker process is stopped: what each signal means, the flags, the early hold.

Three parts, one idea. :class:`StopSignals` (:data:`STANDALONE`, :data:`SUPERVISED`) says what
each stop signal means to a worker process, alone or under the supervisor; :class:`Stops` is the
worker's side of it, the flags its loops look at and the handler that sets them;
:func:`hold_stops_during_start_up` holds a SIGTERM sent while the process is still starting.
What a stopping worker does with the runs it still holds (give them back) is
``jobqueue.worker.loop.release_runs``; the supervisor, which passes stops on to its children, is
``jobqueue.worker.supervisor``.


A stop is a stop, however it is sent (DESIGN.md). A lone worker drains on its first SIGTERM and
releases at once on a second one or on SIGINT. Under ``--processes N`` a group-wide SIGTERM
(systemd's ``KillMode=control-group``, Kubernetes) reaches every child *and* the supervisor,
which passes the stop on; if the children counted both, the supervisor's forward would be their
"second SIGTERM" and cut running jobs off. So the supervisor speaks to its children with its
own signals, and a supervised child never escalates on its own count of SIGTERMs:

* :data:`DRAIN_SIGNAL` (SIGUSR1): stop claiming, let running jobs finish within the grace period
  (idempotent: any number of them is one drain);
* :data:`FORCE_SIGNAL` (SIGUSR2): release running jobs now.

Only the supervisor counts the SIGTERMs it receives (first: drain, second: force), so a second,
separate SIGTERM to the group or to the supervisor alone still forces, and a group SIGTERM drains
exactly like one sent to the supervisor. SIGINT (Ctrl-C reaches the whole foreground group)
releases at once everywhere. See docs/decisions.md, "Stops and process deaths".

A stop sent while ``runworkers`` is still starting is held (:func:`hold_stops_during_start_up`)
until the worker or the supervisor can handle it. A SIGTERM sent then (systemd and Kubernetes
stop a process at any moment) would kill the process with status -15 before the worker has
installed its handlers; it is blocked instead: a blocked signal stays pending, and the worker (or
the supervisor) unblocks it once its handlers are in place, when it is a stop like any other: the
process has claimed nothing, so it exits 0. The block is inherited across ``exec``, so a recycle
in place keeps it.

This module imports only the standard library (and the stdlib-only ``wakeups``):
``python -m jobqueue`` (``jobqueue/__main__.py``) calls :func:`hold_stops_during_start_up` before
importing Django, so that the only moments left unguarded are the interpreter's own start-up.
"""

from __future__ import annotations

import logging
import mmap
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jobqueue.worker.wakeups import WakeUps

#: The supervisor's "drain" to its children (also what a child gets when its supervisor dies).
DRAIN_SIGNAL = signal.SIGUSR1
#: The supervisor's "release running jobs now" to its children.
FORCE_SIGNAL = signal.SIGUSR2

# One byte of memory shared by the supervisor and the children it forks (an anonymous shared
# map, made at import, before any fork): the signal the supervisor received that made it send
# its last DRAIN_SIGNAL or FORCE_SIGNAL. A signal carries no payload, and without this a child
# could only log "SIGUSR1" for an operator's SIGTERM (the trial's finding). 0: none written.
_CAUSE = mmap.mmap(-1, 1)


def record_cause(signum: int) -> None:
    """Record, in the supervisor, the signal it received, before it passes a stop on."""
    _CAUSE[0] = int(signum) & 0xFF


def stop_cause(signum: int, *, supervised: bool) -> str:
    """Return what to call ``signum`` in a worker's log: the real cause of a supervisor's stop.

    Args:
        signum: the signal the worker received.
        supervised: whether the worker runs under the supervisor (its DRAIN_SIGNAL and
            FORCE_SIGNAL then come from it, or from the kernel when it died).

    Returns:
        ``"SIGTERM"`` for a signal received as such; ``"SIGTERM to the supervisor"`` for the
        supervisor's forward of one; ``"the supervisor's exit or a direct SIGUSR1"`` when the
        supervisor recorded nothing.
    """
    name = signal.Signals(signum).name
    if not supervised or signum not in (DRAIN_SIGNAL, FORCE_SIGNAL):
        return name
    cause = _CAUSE[0]
    if cause == 0:
        # Nothing recorded: the supervisor did not send it, the kernel did as it died
        # (PR_SET_PDEATHSIG), or someone sent it to this process by hand.
        return f"the supervisor's exit or a direct {name}"
    return f"{signal.Signals(cause).name} to the supervisor"


@dataclass(frozen=True, slots=True, kw_only=True)
class StopSignals:
    """What each handled signal asks of a worker.

    Attributes:
        drain: signals that always mean "drain" (a repeat changes nothing).
        escalating: signals whose first arrival drains and whose next one forces.
        force: signals that always mean "release running jobs now".
    """

    drain: frozenset[int]
    escalating: frozenset[int]
    force: frozenset[int]

    @property
    def handled(self) -> frozenset[int]:
        """Return every signal this policy gives a meaning to."""
        return self.drain | self.escalating | self.force

    def forces(self, signum: int, *, stopping: bool) -> bool:
        """Return whether ``signum`` asks to release running jobs now (else: drain).

        Args:
            signum: the signal received.
            stopping: whether a stop signal arrived before this one.
        """
        if signum in self.force:
            return True
        return signum in self.escalating and stopping


#: A worker run on its own: SIGTERM drains, a second SIGTERM or SIGINT releases at once.
STANDALONE = StopSignals(
    drain=frozenset({DRAIN_SIGNAL}),
    escalating=frozenset({signal.SIGTERM}),
    force=frozenset({signal.SIGINT, FORCE_SIGNAL}),
)

#: A worker under the supervisor: SIGTERM (however often) drains; the supervisor alone decides
#: when a stop becomes a release, and says so with FORCE_SIGNAL.
SUPERVISED = StopSignals(
    drain=frozenset({signal.SIGTERM, DRAIN_SIGNAL}),
    escalating=frozenset(),
    force=frozenset({signal.SIGINT, FORCE_SIGNAL}),
)


def hold_stops_during_start_up(argv: Sequence[str]) -> None:
    """Hold SIGTERM in a ``runworkers`` process until its worker (or supervisor) handles it.

    Called first thing by ``python -m jobqueue`` and again (earliest moment jobqueue's code runs
    under ``manage.py``) as Django builds the app registry. A SIGTERM sent meanwhile waits,
    blocked, instead of killing the process with status -15; it is then a drain of a process
    that claimed nothing, and the process exits 0. Does nothing in any other command, or outside
    the main thread; calling it twice is harmless.

    Args:
        argv: the process's command line (``sys.argv``); ``argv[1]`` names the command.
    """
    if list(argv[1:2]) != ["runworkers"]:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


logger = logging.getLogger("jobqueue.worker")


class Stops:
    """A worker's stop flags and signal handler.

    Args:
        policy: what each signal means.
        wakeups: rung at a stop, so the claim loop sees it at once.
        running: returns how many jobs run now (for the log line).
        grace_s: how long running jobs may finish after a drain, seconds (for the log line).
    """

    def __init__(
        self, policy: StopSignals, wakeups: WakeUps, running: Callable[[], int], grace_s: float
    ) -> None:
        self.policy = policy
        self._wakeups = wakeups
        self._running = running
        self._grace_s = grace_s
        #: Set once the worker stops claiming.
        self.stopping = threading.Event()
        #: Set when running jobs are to be released now, not after the grace period.
        self.force = threading.Event()
        #: Whether a stop signal arrived.
        self.signalled = False

    def stop(self, *, force: bool = False) -> None:
        """Stop claiming; with ``force``, also release running jobs now instead of after grace."""
        if force:
            self.force.set()
        self.stopping.set()
        self._wakeups.ring()

    def install(self) -> None:
        """Handle the policy's signals (main thread only), and unblock them."""
        for signum in self.policy.handled:
            signal.signal(signum, self._on_signal)
        # The supervisor forks with these blocked, so a stop sent before now waits for us.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.policy.handled)

    def _on_signal(self, signum: int, frame: object) -> None:
        name = stop_cause(signum, supervised=self.policy is SUPERVISED)
        force = self.policy.forces(signum, stopping=self.signalled)
        repeat = self.signalled
        self.signalled = True
        if force:
            logger.warning("%s: releasing running jobs now", name)
            self.stop(force=True)
        elif repeat:
            logger.info("%s: already draining", name)
        else:
            logger.warning(
                "%s: no new claims; %d running job(s) get %.0f s to finish",
                name,
                self._running(),
                self._grace_s,
            )
            self.stop()
