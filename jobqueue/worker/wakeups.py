"""Internal: what wakes a worker's claim loop, apart from its outcomes.

The loop sleeps on one bell. Handler threads ring it after delivering an outcome (the outcomes
themselves go to the completer's queue), the listener rings it when a queue got ready jobs (or
delayed ones, with a time: a *timer*), :meth:`Worker.stop` rings it, and so may a signal handler.

The bell is a :class:`queue.SimpleQueue`, not a :class:`threading.Event`: ``SimpleQueue.put``
is reentrant, so a signal handler that interrupts the main thread while it waits can ring it
without a deadlock (an Event's lock is not reentrant). It holds at most one pending ring (a
flag, set before the put and cleared when a wait takes it): a loop that is never idle never
waits on the bell, and one entry per outcome grew its memory without bound (issue 15).
"""

from __future__ import annotations

import heapq
import queue
import threading
import time

#: Most delayed-job wake-up times a worker remembers (the soonest are kept); beyond them, and
#: for jobs enqueued before it started, polling finds delayed jobs.
MAX_WAKE_TIMERS = 10_000


class WakeUps:
    """The claim loop's bell, its "claim now" request, and its timers (delayed jobs falling due)."""

    def __init__(self) -> None:
        self._bell: queue.SimpleQueue[None] = queue.SimpleQueue()
        # True while a ring is in the bell (or about to be put): further rings add nothing.
        # Threads racing past the check may put one each: bounded by the threads, not the jobs.
        self._rung = False
        self._lock = threading.Lock()
        # time.monotonic() values at which delayed jobs fall due: a heap, soonest first.
        self._timers: list[float] = []
        # Set by wake(), cleared by the claim loop before it claims: a burst of notifications
        # rings once, not once per notification.
        self._claim_pending = False
        #: How many wake-ups came so far (each call of :meth:`wake`): a claim that came back
        #: short is repeated without asking the store first only when this moved since.
        self.generation = 0

    def ring(self) -> None:
        """Wake the loop so it looks at what changed (reentrant: safe in a signal handler)."""
        if not self._rung:
            # Set before the put: a wait that takes this ring clears it after, never before.
            self._rung = True
            self._bell.put(None)

    def wake(self, delay_s: float = 0.0) -> None:
        """Make the claim loop claim now, or in ``delay_s`` seconds (called by the listener)."""
        self.generation += 1
        if delay_s > 0:
            self.add_timer(delay_s)
            # Only to make the loop recompute how long it sleeps.
            self.ring()
        elif not self._claim_pending:
            self._claim_pending = True
            self.ring()

    @property
    def claim_pending(self) -> bool:
        """Return whether a wake-up asked for a claim the loop has not made yet."""
        return self._claim_pending

    def add_timer(self, delay_s: float) -> None:
        """Remember that a delayed job falls due in ``delay_s`` seconds."""
        with self._lock:
            heapq.heappush(self._timers, time.monotonic() + delay_s)
            if len(self._timers) > MAX_WAKE_TIMERS:
                # A sorted list is a heap: keep the soonest half.
                self._timers = heapq.nsmallest(MAX_WAKE_TIMERS // 2, self._timers)

    def next_timer(self) -> float | None:
        """Return when (``time.monotonic``) the soonest timer falls due, or None."""
        timers = self._timers
        return timers[0] if timers else None

    def timer_due(self) -> bool:
        """Return whether a timer has fallen due that no claim has served yet."""
        timers = self._timers
        return bool(timers) and timers[0] <= time.monotonic()

    def claiming(self) -> None:
        """Forget the claim request and the timers that the claim about to run serves."""
        self._claim_pending = False
        now = time.monotonic()
        with self._lock:
            while self._timers and self._timers[0] <= now:
                heapq.heappop(self._timers)

    def wait(self, timeout: float) -> bool:
        """Sleep until the bell rings or ``timeout`` seconds pass; return whether it rang."""
        try:
            self._bell.get(timeout=timeout)
        except queue.Empty:
            return False
        # Cleared before the caller looks: a ring from here on puts again and wakes the next
        # wait; one that found it set came before, and what it rang for is seen now.
        self._rung = False
        # Rings that came meanwhile are answered by this one: the caller looks at everything.
        while True:
            try:
                self._bell.get_nowait()
            except queue.Empty:
                return True
