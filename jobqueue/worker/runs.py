"""Internal: the runs a worker holds (claimed, started, not yet recorded), shared by its parts.

The claim loop adds runs and the completer removes them, both on the main thread; the heartbeat
reads them from its own thread, under :attr:`Runs.lock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jobqueue.logging import job_extra
from jobqueue.registry import JobType
from jobqueue.retries import RunOutcome
from jobqueue.store import ClaimedJob
from jobqueue.worker.context import JobContext


@dataclass(slots=True)
class Run:
    """One run of a claimed job in this worker.

    Attributes:
        claimed: the job, as the claim returned it.
        context: what the handler sees (cancel and lease-lost flags).
        job_type: the handler, resolved once after the claim; None if it could not be (the
            executor then resolves it again and records why it failed).
        outcome: set when the handler returned or the run passed its timeout.
        started: when (``time.monotonic``) the run started.
        done_at: when (``time.monotonic``) the outcome came in; 0.0 while running.
        on_loop: its handler is an ``async def`` running on the worker's event loop
            (``eventloop.py``), not on a handler thread.
    """

    claimed: ClaimedJob
    context: JobContext
    job_type: JobType | None = None
    outcome: RunOutcome | None = None
    started: float = field(default_factory=time.monotonic)
    done_at: float = 0.0
    on_loop: bool = False

    @property
    def deadline(self) -> float:
        """Return when (``time.monotonic``) this run passes its ``timeout_s``."""
        return self.started + self.claimed.timeout_s

    @property
    def label(self) -> str:
        """Return how log lines name this run: id, type and attempt."""
        c = self.claimed
        return f"job {c.id} {c.job_type} attempt {c.attempt}/{c.max_attempts}"

    def extra(self) -> dict[str, Any]:
        """Return the ``extra`` fields of a log line about this run (``jobqueue.logging``)."""
        return job_extra(
            self.claimed,
            worker_id=self.context.worker_id,
            duration_s=self.outcome.duration_s if self.outcome is not None else None,
        )

    @property
    def took(self) -> str:
        """Return how long the handler ran, as log lines say it (needs the outcome)."""
        assert self.outcome is not None
        return f"{self.outcome.duration_s * 1000:.1f} ms"


class Runs:
    """The worker's runs by job id: a collection of job ids, with the runs behind them."""

    def __init__(self) -> None:
        self._by_id: dict[int, Run] = {}
        #: How many of the runs are on the event loop (the others hold handler threads).
        self.on_loop = 0
        #: Held to add or remove a run, and by other threads to read them.
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._by_id

    def get(self, job_id: int) -> Run | None:
        """Return the run of ``job_id``, or None."""
        return self._by_id.get(job_id)

    def add(self, run: Run) -> None:
        """Hold ``run`` (under the lock)."""
        with self.lock:
            old = self._by_id.get(run.claimed.id)
            self.on_loop += run.on_loop - (old.on_loop if old is not None else 0)
            self._by_id[run.claimed.id] = run

    def remove(self, job_id: int) -> None:
        """Forget the run of ``job_id`` (under the lock); no error if there is none."""
        with self.lock:
            run = self._by_id.pop(job_id, None)
            if run is not None:
                self.on_loop -= run.on_loop

    def clear(self) -> None:
        """Forget every run (under the lock)."""
        with self.lock:
            self._by_id.clear()
            self.on_loop = 0

    @property
    def on_threads(self) -> int:
        """Return how many runs hold (or held, until recorded) a handler thread's slot."""
        return len(self._by_id) - self.on_loop

    def items(self) -> list[tuple[int, Run]]:
        """Return ``(job id, run)`` pairs, copied (main thread: the only writer)."""
        return list(self._by_id.items())

    def values(self) -> list[Run]:
        """Return the runs, copied (main thread: the only writer)."""
        return list(self._by_id.values())

    def snapshot(self) -> dict[int, Run]:
        """Return a copy taken under the lock (for threads other than the main one)."""
        with self.lock:
            return dict(self._by_id)
