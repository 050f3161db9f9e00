"""Internal: a worker's handler threads, reused, and capped at twice its concurrency.

Python cannot kill a thread, so a handler that runs past its ``timeout_s`` keeps its thread
until it returns: a *runaway*. The worker fails such a run at once and gives its slot to the
next job, which then needs another thread. Half of the cap (``concurrency`` threads) is there
for runaways, so up to ``concurrency`` of them cost no capacity; one more and the cap binds (a
slot would have no thread), so the worker recycles its process then (see
:meth:`HandlerThreads.runaways`), because only ending the process ends them. Nothing here ever
starts a thread past the cap: a run that would need one is refused, and the worker asks
:meth:`HandlerThreads.room` before it claims.

Threads are reused because starting one waits for it to be scheduled: on a busy 2-core machine
that cost more per job than the claim and the ack together (docs/performance.md).

Waking a thread costs too (about 40 µs of the claim loop's time per job when each run was put
to a thread of its own, docs/performance.md). So runs wait in one shared queue, and a wake-up
is chained: a submit wakes a sleeping thread only when no idle thread is already on its way to
the queue, and a thread that takes a run wakes the next sleeper only when runs are left and
no other thread is on its way. A thread that finishes a run takes the next one before it
sleeps. Short runs are then taken by the threads already awake (few wake-ups); long ones pull
in one more thread each, so all of a claim's runs are running within a chain of wake-ups.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

#: Handler threads a worker may have, per unit of ``--concurrency``: one for each slot, and one
#: for each runaway handler still holding a thread after its timeout.
THREADS_PER_SLOT = 2

#: A handler thread idle this long ends, seconds.
IDLE_THREAD_S = 60.0


class ThreadCapReached(RuntimeError):
    """Internal: a run was submitted while every handler thread allowed is busy."""


class HandlerThreads:
    """Handler threads that are reused: a run goes to an idle thread, else to a new one.

    Args:
        run: called on a handler thread with a submitted run's arguments; returns its result.
        done: called on the same thread with that result, once the thread counts as idle
            again (so a caller woken by ``done`` already sees the thread free).
        concurrency: the worker's slots; the cap is :data:`THREADS_PER_SLOT` times this.
        idle_s: a thread idle this long ends, seconds.
    """

    def __init__(
        self,
        run: Callable[..., Any],
        done: Callable[[Any], None],
        *,
        concurrency: int,
        idle_s: float = IDLE_THREAD_S,
    ) -> None:
        self._run = run
        self._done = done
        self.cap = THREADS_PER_SLOT * concurrency
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        # Runs submitted to idle threads, not taken yet: (lease token, args).
        self._pending: deque[tuple[uuid.UUID, tuple]] = deque()
        self._threads = 0
        # Idle threads: asleep on _wakeup, or awake and about to look at _pending (those
        # just done with a run, and sleepers woken for a run: _called).
        self._sleeping = 0
        self._awake = 0
        self._called = 0
        # Runs whose handler has not returned yet (pending ones too): token -> whether overran.
        self._busy: dict[uuid.UUID, bool] = {}

    @property
    def threads(self) -> int:
        """Return how many handler threads are alive (busy or idle)."""
        return self._threads

    @property
    def busy(self) -> int:
        """Return how many submitted runs have not returned yet (runaways included)."""
        with self._lock:
            return len(self._busy)

    @property
    def runaways(self) -> int:
        """Return how many handlers still run after :meth:`overran` was called for them."""
        with self._lock:
            return sum(self._busy.values())

    def room(self) -> int:
        """Return how many runs could start now without passing the cap."""
        with self._lock:
            return self._free() + self.cap - self._threads

    def _free(self) -> int:
        # Idle threads no pending run counts on (under the lock).
        return self._sleeping + self._awake - len(self._pending)

    def overran(self, token: uuid.UUID) -> None:
        """Count the run ``token`` as a runaway until its handler returns (if it still runs)."""
        with self._lock:
            if token in self._busy:
                self._busy[token] = True

    def submit(self, token: uuid.UUID, *args: object) -> None:
        """Run ``run(*args)`` on an idle thread, or on a new one if none is idle.

        Args:
            token: the run's lease token (which run :meth:`overran` means).
            *args: passed to ``run``.

        Raises:
            ThreadCapReached: no thread is idle and the cap is reached; nothing was started.
        """
        with self._lock:
            if self._free() > 0:
                self._busy[token] = False
                self._pending.append((token, args))
                self._call_one()
                return
            if self._threads >= self.cap:
                raise ThreadCapReached(
                    f"all {self.cap} handler threads are busy ({sum(self._busy.values())} "
                    "of them with runs past their timeout)"
                )
            self._threads += 1
            self._busy[token] = False
        try:
            threading.Thread(
                target=self._loop, args=(token, args), name="jobqueue-handler", daemon=True
            ).start()
        except BaseException:
            with self._lock:
                self._threads -= 1
                self._busy.pop(token, None)
            raise

    def _call_one(self) -> None:
        """Wake a sleeper for the pending runs, unless an idle thread is already on its way."""
        # (Under the lock.) One thread on its way is enough: it calls the next (_take).
        if self._pending and not (self._awake or self._called) and self._sleeping > self._called:
            self._called += 1
            self._wakeup.notify()

    def _take(self) -> tuple[uuid.UUID, tuple] | None:
        """Take a pending run for this awake idle thread, or sleep; None: idle too long (end)."""
        # (Under the lock; this thread counts in _awake.)
        while not self._pending:
            self._awake -= 1
            self._sleeping += 1
            woken = self._wakeup.wait(self._idle_s)
            self._sleeping -= 1
            self._awake += 1
            if self._called:
                # Whoever was called, this thread now looks (a timed-out one as well).
                self._called -= 1
            if not woken and not self._pending:
                self._awake -= 1
                self._threads -= 1
                return None
        item = self._pending.popleft()
        self._awake -= 1
        # Runs are left: make sure a thread is on its way to them (a long run may hold us).
        self._call_one()
        return item

    def _loop(self, token: uuid.UUID, args: tuple) -> None:
        while True:
            try:
                result = self._run(*args)
            except BaseException:
                # ``run`` is meant never to raise; if it does, this thread ends, uncounted.
                with self._lock:
                    self._busy.pop(token, None)
                    self._threads -= 1
                    # Runs it would have taken: another thread must come for them.
                    self._call_one()
                raise
            with self._lock:
                self._busy.pop(token, None)
                self._awake += 1
            self._done(result)
            # Drop this run's references before waiting: an idle thread holds no old job.
            del result, args
            with self._lock:
                item = self._take()
            if item is None:
                return
            token, args = item
