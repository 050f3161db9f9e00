"""Internal: the worker's event loop, where its ``async def`` handlers run, many at once.

A thread per job would make ``async def`` pointless: a handler that awaits an HTTP response for
half a second would hold a thread for that half second, like a sync one. So a worker process
runs every ``async def`` handler as a task on one event loop, on one thread of its own (started
at the first async job: a worker with only sync handlers has none), up to ``ASYNC_CONCURRENCY``
at once (``runworkers --async-concurrency``), while sync handlers keep their threads
(``threads.py``). Both kinds come from the same claims and end in the same completer.

What holds for a sync run holds here, by the same code: the claim loop's thread fails a run at
its ``timeout_s`` (``starting.py``), the heartbeat tells a run of its cancel request or its lost
lease (``heartbeat.py``), and a stopping worker releases what still runs (``loop.py``). Each
of those tells the run's :class:`~jobqueue.worker.context.JobContext`, and the context's stop
callback cancels the run's task here: a coroutine, unlike a thread, can be stopped, so an async
run past its timeout is no runaway and never recycles the process.

A handler that blocks the loop (a sync call inside ``async def``) stalls every other async job
of the process; each step of each handler is timed (``stalls.py``), and one that held the loop
longer than :data:`~jobqueue.worker.stalls.STALL_S` is logged with its job and counted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections

from jobqueue.logging import job_extra
from jobqueue.registry import JobType
from jobqueue.retries import RunOutcome
from jobqueue.store import ClaimedJob
from jobqueue.worker.context import JobContext
from jobqueue.worker.executor import execute_async, failure_outcome
from jobqueue.worker.stalls import LoopStalls, timed_steps

logger = logging.getLogger("jobqueue.worker")

#: How long :meth:`EventLoopRuns.close` waits for cancelled tasks to end, seconds.
CLOSE_WAIT_S = 5.0


class EventLoopRuns:
    """Run ``async def`` handlers as tasks on one event loop thread, at most ``limit`` at once.

    Args:
        deliver: called (on the loop's thread) with ``(lease token, outcome)`` of each run.
        limit: the most runs at once (``ASYNC_CONCURRENCY``).
        worker_id: the worker's name (in error entries).
        stalls: where steps that blocked the loop are counted.
    """

    def __init__(
        self,
        deliver: Callable[[tuple[uuid.UUID, RunOutcome]], None],
        *,
        limit: int,
        worker_id: str,
        stalls: LoopStalls,
    ) -> None:
        self._deliver = deliver
        self.limit = limit
        self.worker_id = worker_id
        self.stalls = stalls
        self._lock = threading.Lock()
        self._busy = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def busy(self) -> int:
        """Return how many submitted runs have not delivered their outcome yet."""
        with self._lock:
            return self._busy

    def room(self) -> int:
        """Return how many more runs may start now."""
        with self._lock:
            return self.limit - self._busy

    def submit(self, job: ClaimedJob, context: JobContext, job_type: JobType) -> None:
        """Start ``job``'s handler as a task on the loop (started at the first call)."""
        with self._lock:
            self._busy += 1
        loop = self._started()
        loop.call_soon_threadsafe(self._spawn, job, context, job_type)

    def _started(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._serve, args=(loop,), name="jobqueue-event-loop", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()
            # Like the end of a request: close what handlers' sync_to_async calls left here.
            close_old_connections()

    def _spawn(self, job: ClaimedJob, context: JobContext, job_type: JobType) -> None:
        task = asyncio.ensure_future(self._run(job, context, job_type))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        loop = task.get_loop()

        # The thread that tells the context (claim loop, heartbeat) is not the loop's.
        def cancel() -> None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop is closed: the task ended with it
                pass

        context.on_stop(cancel)

    async def _run(self, job: ClaimedJob, context: JobContext, job_type: JobType) -> None:
        def watch(coro):
            return timed_steps(coro, lambda s: self.stalls.stalled(job, s))

        try:
            outcome = await execute_async(job, context, job_type=job_type, watch=watch)
        except BaseException as exc:  # as in starting.Starter._run_job: never lose the slot
            logger.exception(
                "job %s: could not turn its run into an outcome",
                job.id,
                extra=job_extra(job, worker_id=self.worker_id),
            )
            outcome = failure_outcome(job, exc, self.worker_id)
        with self._lock:
            self._busy -= 1
        self._deliver((job.lease_token, outcome))

    def close(self) -> int:
        """Cancel the tasks still running, stop the loop and its thread.

        Returns:
            How many runs still had no outcome when the loop stopped (a handler that swallows
            its cancellation for longer than :data:`CLOSE_WAIT_S`): they are abandoned.
        """
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return 0

        async def cancel_all() -> None:
            tasks = [t for t in self._tasks if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
            # The connection of the thread where sync_to_async ran the handlers' (and the job
            # contexts') queries, as a process ends a request's.
            await sync_to_async(connections.close_all)()
            asyncio.get_running_loop().stop()

        asyncio.run_coroutine_threadsafe(cancel_all(), loop)
        thread.join(timeout=CLOSE_WAIT_S + 1)
        self._loop = self._thread = None
        return self.busy
