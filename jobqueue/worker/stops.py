"""Internal: how a worker is asked to stop: by :meth:`Stops.stop`, or by a signal.

What each signal means (drain, or release at once) is ``worker/stopping.py``'s policy; this is
the worker's side of it: the flags its loops look at, and the handler that sets them.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from jobqueue.worker.stopping import SUPERVISED, StopSignals, stop_cause
from jobqueue.worker.wakeups import WakeUps

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
