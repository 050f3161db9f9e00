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

A thread given a run still has to be woken and then to take the GIL from the thread that gave it
(the claim loop, which goes on with its own Python: the rate limiters' wait, its next sleep).
:meth:`HandlerThreads.wait_begun` lets the giver stand aside until its runs have begun: after a
claim that came back short (an idle worker's trickle job) the loop has nothing more urgent, and
the job starts one wake-up after its claim instead of two (docs/performance.md, "Pickup, hop by
hop, on a private cluster").
"""

from __future__ import annotations

import queue
import threading
import uuid
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
        self._work: queue.SimpleQueue[tuple[uuid.UUID, tuple]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Signalled when the last run submitted has been taken up by its thread.
        self._begun = threading.Condition(self._lock)
        self._threads = 0
        self._idle = 0
        # Runs submitted whose thread has not begun them yet.
        self._pending = 0
        # Runs whose handler has not returned yet: lease token -> whether it overran.
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
            return self._idle + self.cap - self._threads

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
            if self._idle:
                # Reserve one idle thread; it takes this item (see _loop's exit check).
                self._idle -= 1
                self._busy[token] = False
                self._pending += 1
                self._work.put((token, args))
                return
            if self._threads >= self.cap:
                raise ThreadCapReached(
                    f"all {self.cap} handler threads are busy ({sum(self._busy.values())} "
                    "of them with runs past their timeout)"
                )
            self._threads += 1
            self._busy[token] = False
            self._pending += 1
        try:
            threading.Thread(
                target=self._loop, args=(token, args), name="jobqueue-handler", daemon=True
            ).start()
        except BaseException:
            with self._lock:
                self._threads -= 1
                self._busy.pop(token, None)
                self._began()
            raise

    def wait_begun(self, timeout: float) -> bool:
        """Wait until every run submitted so far has begun on its thread, at most ``timeout``.

        The caller blocks without the GIL meanwhile, so a woken handler thread takes it at once
        instead of waiting for the caller's next blocking call.

        Args:
            timeout: longest wait, seconds.

        Returns:
            Whether they all began (False: the wait timed out; they begin later).
        """
        with self._begun:
            return self._begun.wait_for(lambda: not self._pending, timeout)

    def _began(self) -> None:
        # (Under the lock.) One submitted run was taken up, or will never be.
        self._pending -= 1
        if not self._pending:
            self._begun.notify_all()

    def _loop(self, token: uuid.UUID, args: tuple) -> None:
        while True:
            with self._lock:
                self._began()
            try:
                result = self._run(*args)
            except BaseException:
                # ``run`` is meant never to raise; if it does, this thread ends, uncounted.
                with self._lock:
                    self._busy.pop(token, None)
                    self._threads -= 1
                raise
            with self._lock:
                self._busy.pop(token, None)
                self._idle += 1
            self._done(result)
            # Drop this run's references before waiting: an idle thread holds no old job.
            del result, args
            try:
                token, args = self._work.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    # submit() reserves a thread and puts its item under the lock, so here
                    # either the item is queued (take it) or no one counts on this thread.
                    try:
                        token, args = self._work.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        self._threads -= 1
                        return
