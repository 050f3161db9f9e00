"""Internal: ``runworkers --max-tasks N``: a worker that finishes N jobs, then ends.

What counts as a task: a run that ended, whatever its outcome (succeeded, retried, dead,
cancelled), and a run whose lease was lost (its handler ran; another worker or the reaper took
the job back, so the outcome was discarded). It is the handler's run that costs the process
memory and time, and recycling is what the count is for. Runs released back to ``ready`` at a
stop, and jobs given back unstarted after the claim (open breaker, a suspect waiting to run
alone), do not count: their handler did not run here. ``docs/decisions.md`` ("Worker recycling by
task count") says why.

The quota never claims past the count: each claim is capped at N minus the tasks finished minus
the runs in flight, so the process ends with exactly N tasks behind it (or fewer, when stopped
earlier), never one more that it would have to release. When the count is reached the worker
stops claiming (its first claim-loop pass that sees it) and drains; nothing is running by then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

logger = logging.getLogger("jobqueue.worker")

#: The worker's counters (``Worker.stats``) that count as a finished task.
COUNTED = ("succeeded", "retried", "dead", "cancelled", "lost")


class TaskQuota:
    """The count of tasks a worker may finish before it ends (``--max-tasks``).

    Args:
        max_tasks: how many tasks, >= 1; None for no limit.
        stats: the worker's counters, kept by the completer (read here, never written).
        running: ``running()`` returns how many runs are in flight (claimed, not yet recorded).
        stop: ``stop()`` stops the worker's claiming (a drain), called once when the count is
            reached.
    """

    def __init__(
        self,
        max_tasks: int | None,
        stats: Mapping[str, int],
        running: Callable[[], int],
        stop: Callable[[], None],
    ) -> None:
        if max_tasks is not None and max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, got {max_tasks!r}")
        self.max_tasks = max_tasks
        self._stats = stats
        self._running = running
        self._stop = stop
        self._stopped = False

    @property
    def spent(self) -> bool:
        """Return whether the count is reached: the worker claims no more."""
        return self.max_tasks is not None and self.finished >= self.max_tasks

    @property
    def finished(self) -> int:
        """Return how many tasks this worker finished so far (see the module docstring)."""
        return sum(self._stats[key] for key in COUNTED)

    def cap(self, free: int) -> int:
        """Return how many jobs the next claim may take, given ``free`` slots.

        Returns:
            ``free``, or fewer so that tasks finished plus runs in flight stay within the count;
            0 once it is reached.
        """
        if self.max_tasks is None:
            return free
        return max(min(free, self.max_tasks - self.finished - self._running()), 0)

    def check(self) -> None:
        """Stop the worker once the count is reached (once; later calls do nothing)."""
        if self._stopped or not self.spent:
            return
        self._stopped = True
        logger.info(
            "worker reached max_tasks=%d (%d finished): no new claims; it ends once drained",
            self.max_tasks or 0,
            self.finished,
        )
        self._stop()
