"""Internal: event-loop stalls: which ``async def`` handler blocked the loop, and for how long.

While one step of a coroutine runs (from one ``await`` that yields to the next), nothing else on
the loop runs: a handler that calls ``time.sleep`` or a sync HTTP client inside ``async def``
holds every other async job of its process. :func:`timed_steps` times each step of a handler's
coroutine; a step longer than :data:`STALL_S` is a *stall*, logged at once with the job and how
long the loop was held, and counted per job type by :class:`LoopStalls`. Its
:class:`StallReporter` service adds the counts to the cluster's counters
(``jobqueue_event_loop_stalls_total`` and ``jobqueue_event_loop_stalled_seconds_total``, read
by ``jobqueue/metrics.py``) from the maintenance thread, so the loop never waits on the
database for it.

Timing the steps themselves, rather than sampling how late a timer fires, names the culprit: the
lag a sampler sees is the stall of whichever step ran, and only the step knows its job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from jobqueue.logging import job_extra
from jobqueue.maintenance.pruning import record_loop_stalls
from jobqueue.store import ClaimedJob

logger = logging.getLogger("jobqueue.worker")

#: A step of an ``async def`` handler that holds the event loop longer than this is a stall,
#: seconds: asyncio's own debug mode calls a callback slow past the same 100 ms.
STALL_S = 0.1


class _TimedSteps:
    """An awaitable that drives ``coro`` as ``await coro`` would, timing each of its steps."""

    __slots__ = ("_coro", "_on_step")

    def __init__(self, coro: Coroutine[Any, Any, Any], on_step: Callable[[float], None]) -> None:
        self._coro = coro
        self._on_step = on_step

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, on_step = self._coro, self._on_step
        value: Any = None
        error: BaseException | None = None
        while True:
            began = time.perf_counter()
            try:
                if error is None:
                    yielded = coro.send(value)
                else:
                    yielded = coro.throw(error)
            except StopIteration as stop:
                on_step(time.perf_counter() - began)
                return stop.value
            except BaseException:
                on_step(time.perf_counter() - began)
                raise
            finally:
                error = None
            on_step(time.perf_counter() - began)
            try:
                value = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the task: pass it on
                value, error = None, exc


def timed_steps(coro: Coroutine[Any, Any, Any], on_step: Callable[[float], None]) -> _TimedSteps:
    """Return an awaitable that runs ``coro``, calling ``on_step(seconds)`` after each step.

    Args:
        coro: a handler's coroutine (not started).
        on_step: called on the loop's thread with how long each step held the loop, seconds.
    """
    return _TimedSteps(coro, on_step)


class LoopStalls:
    """The stalls of one worker's event loop: logged as they happen, counted until reported.

    Args:
        worker_id: the worker's name (in log lines).
        stall_s: a step longer than this is a stall, seconds.
    """

    def __init__(self, worker_id: str, stall_s: float = STALL_S) -> None:
        self.worker_id = worker_id
        self.stall_s = stall_s
        self._lock = threading.Lock()
        # job type -> (stalls, seconds) not yet reported.
        self._pending: dict[str, tuple[int, float]] = {}
        #: Every stall seen by this process: job type -> (stalls, seconds), never reset.
        self.seen: dict[str, tuple[int, float]] = {}

    def stalled(self, job: ClaimedJob, seconds: float) -> None:
        """Count and log a step of ``job``'s handler that held the loop ``seconds``, if a stall."""
        if seconds < self.stall_s:
            return
        with self._lock:
            for counts in (self._pending, self.seen):
                n, total = counts.get(job.job_type, (0, 0.0))
                counts[job.job_type] = (n + 1, total + seconds)
        logger.warning(
            "job %s %s blocked the event loop for %.0f ms (a blocking call in an async def "
            "handler: every async job of this process waited)",
            job.id,
            job.job_type,
            seconds * 1000,
            extra=job_extra(job, worker_id=self.worker_id, duration_s=seconds),
        )

    def take(self) -> dict[str, tuple[int, float]]:
        """Return the stalls not reported yet (job type -> (stalls, seconds)), and forget them."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def give_back(self, counts: dict[str, tuple[int, float]]) -> None:
        """Keep ``counts`` (a failed report's) for the next report."""
        with self._lock:
            for job_type, (n, seconds) in counts.items():
                m, total = self._pending.get(job_type, (0, 0.0))
                self._pending[job_type] = (m + n, total + seconds)


class StallReporter:
    """Add a worker's stalls to the cluster's counters: a maintenance service.

    Args:
        stalls: the worker's stall counts.
        using: database alias of the worker's queue.
        interval_s: how often to report, seconds.
    """

    name = "loop-stalls"

    def __init__(self, stalls: LoopStalls, *, using: str, interval_s: float = 5.0) -> None:
        self.stalls = stalls
        self.using = using
        self.interval_s = interval_s

    def run_once(self) -> int:
        """Report what is pending; return how many stalls were reported.

        Raises:
            DatabaseError: the database is unavailable (the counts wait for the next round).
        """
        pending = self.stalls.take()
        if not pending:
            return 0
        try:
            record_loop_stalls(pending, using=self.using)
        except BaseException:
            self.stalls.give_back(pending)
            raise
        return sum(n for n, _ in pending.values())
