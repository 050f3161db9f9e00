"""What ``jobqueue.status`` and ``jobqueue.result`` return: frozen values read from a job's row.

A leaf (it imports only ``states``). The read itself is ``jobqueue/flows/results.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobqueue.states import FINISHED

__all__ = ["JobResult", "JobStatus", "Progress"]


@dataclass(frozen=True, slots=True)
class Progress:
    """A running job's progress as its handler last reported it (``context.progress``).

    Attributes:
        done: steps done.
        total: steps in all, or None when the handler did not say.
    """

    done: int
    total: int | None = None

    @property
    def fraction(self) -> float | None:
        """Return ``done / total`` (0.0..1.0), or None when the total is unknown or zero."""
        return self.done / self.total if self.total else None

    def __str__(self) -> str:
        if self.total is None:
            return f"{self.done} done"
        percent = f" ({self.done / self.total:.0%})" if self.total else ""
        return f"{self.done} of {self.total}{percent}"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """Where a job stands (``jobqueue.status(job_id)``).

    Attributes:
        id, job_type, queue: as enqueued.
        state: ``ready``, ``scheduled``, ``leased``, ``succeeded``, ``dead`` or ``cancelled``.
        attempts: claims so far; max_attempts: claims allowed.
        progress: the handler's last report (:class:`Progress`), or None.
        has_checkpoint: whether a checkpoint is stored (a later attempt resumes from it).
        cancel_requested: an operator asked a running job to cancel.
        dead_reason: why it is dead (``""`` unless dead).
        last_error: the last entry of its error history, or None.
        created_at, started_at, finished_at: aware datetimes (None until they happen).
    """

    id: int
    job_type: str
    queue: str
    state: str
    attempts: int
    max_attempts: int
    progress: Progress | None
    has_checkpoint: bool
    cancel_requested: bool
    dead_reason: str
    last_error: dict[str, Any] | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        """Return True once the job succeeded, is dead or was cancelled."""
        return self.state in FINISHED


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    """What a job produced (``jobqueue.result(job_id)``, ``jobqueue.wait(job_id)``).

    Attributes:
        id: the job.
        state: as in :class:`JobStatus`.
        attempts: claims so far.
        result: the handler's return value as stored (JSON), or None until it succeeded.
        errors: the error history, oldest first (one dict per failed attempt, lease expiry,
            release, cancel or operator retry).
        dead_reason: why it is dead (``""`` unless dead).
    """

    id: int
    state: str
    attempts: int
    result: Any
    errors: tuple[dict[str, Any], ...]
    dead_reason: str

    @property
    def succeeded(self) -> bool:
        """Return True when the job succeeded (``result`` is its handler's return value)."""
        return self.state == "succeeded"

    @property
    def finished(self) -> bool:
        """Return True once the job succeeded, is dead or was cancelled."""
        return self.state in FINISHED

    @property
    def last_error(self) -> dict[str, Any] | None:
        """Return the last entry of the error history, or None."""
        return self.errors[-1] if self.errors else None
