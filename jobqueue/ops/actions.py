"""Internal: the operator's bulk retry and cancel, over ``jobqueue.client`` (no SQL of their own).

Each goes through the client functions the admin uses, so the lease and token fences, the
history entries, the dedupe-key check and the signals are the same whoever acts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobqueue.errors import JobNotFound
from jobqueue.ops import repairs as client

#: Ids per call to the client in a bulk action (and per progress report).
CHUNK = 1000


@dataclass(kw_only=True)
class BulkResult:
    """What a bulk action did with the ids it was given."""

    done: list[int] = field(default_factory=list)
    #: id -> why nothing was done (its state, or "dedupe key held by job N").
    skipped: dict[int, str] = field(default_factory=dict)
    missing: list[Any] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Return the outcome for ``--json``."""
        return {
            "done": len(self.done),
            "ids": self.done,
            "skipped": {str(k): v for k, v in self.skipped.items()},
            "missing": self.missing,
        }


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def retry(
    ids: Sequence[int],
    using: str = "default",
    progress: Callable[[int], None] | None = None,
    by: Any = None,
) -> BulkResult:
    """Retry dead or cancelled jobs (``client.retry_many``, a thousand ids per call).

    Args:
        ids: job ids.
        using: database alias of the queue.
        by: who acts (a Django user or a name; ``jobqueue.ops.audit``).
        progress: called with the number of ids handled so far, after each chunk.

    Returns:
        The :class:`BulkResult`: retried ids, ids skipped with their reason, missing ids.
    """
    outcome = BulkResult()
    handled = 0
    for chunk in _chunks(ids):
        result = client.retry_many(chunk, by=by, using=using)
        outcome.done.extend(result.retried)
        outcome.skipped.update(result.not_retryable)
        for job_id in result.duplicate:
            holder = result.holders.get(job_id)
            outcome.skipped[job_id] = f"dedupe key held by job {holder}" if holder else "dedupe"
        outcome.missing.extend(result.missing)
        handled += len(chunk)
        if progress is not None:
            progress(handled)
    return outcome


def cancel(
    ids: Sequence[int],
    using: str = "default",
    progress: Callable[[int], None] | None = None,
    by: Any = None,
) -> BulkResult:
    """Cancel jobs (``client.cancel`` each: a running one gets a cancel request).

    Args:
        ids: job ids.
        using: database alias of the queue.
        by: who acts (a Django user or a name; ``jobqueue.ops.audit``).
        progress: called with the number of ids handled so far, after each chunk.

    Returns:
        The :class:`BulkResult`: cancelled (or cancel-requested) ids, ids skipped because they
        had finished or were already asked to cancel, missing ids.
    """
    outcome = BulkResult()
    handled = 0
    for chunk in _chunks(ids):
        for job_id in chunk:
            try:
                if client.cancel(job_id, by=by, using=using):
                    outcome.done.append(job_id)
                else:
                    outcome.skipped[job_id] = "finished or already cancelling"
            except JobNotFound:
                outcome.missing.append(job_id)
        handled += len(chunk)
        if progress is not None:
            progress(handled)
    return outcome
