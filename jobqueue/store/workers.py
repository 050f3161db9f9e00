"""Internal: the worker registry's part of the store seam (the ``Worker`` rows).

One part of the composite :class:`~jobqueue.store.protocol.Store`. Both stores implement it with
the ORM mixin :class:`~jobqueue.store.base.WorkerRegistry`: the rows are written rarely.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class WorkerStore(Protocol):
    """Register, refresh and remove the row of a worker process."""

    def register_worker(
        self, worker_id: str, queues: Sequence[str], concurrency: int, heartbeat_interval_s: float
    ) -> None:
        """Insert or refresh this process's Worker row (a reused id takes the row over).

        Args:
            worker_id: the process's id.
            queues: the queues it serves.
            concurrency: most jobs it runs at once.
            heartbeat_interval_s: seconds between its heartbeats.
        """

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        """Mark the worker seen now, with how many jobs it runs and its status (``draining``)."""

    def set_listener_up(self, worker_id: str, up: bool | None) -> None:
        """Record whether the worker's LISTEN connection is up (None: it does not LISTEN)."""

    def prune_workers(self, silent_for_s: float) -> int:
        """Delete the rows of workers not seen for ``silent_for_s`` seconds; return how many."""

    def deregister_worker(self, worker_id: str) -> None:
        """Delete the worker's row at clean exit."""
