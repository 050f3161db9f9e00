"""Internal: the operator's bulk actions, over ``jobqueue.ops.repairs`` (no SQL of their own).

Two callers, two reports: ``manage.py jobqueue`` (:func:`retry`, :func:`cancel`, a
:class:`BulkResult` with progress) and the admin (:func:`cancel_jobs`, :func:`retry_jobs`,
:func:`run_jobs_now`, an :class:`ActionReport` job by job, a transaction per chunk).

Each goes through the client functions the admin uses, so the lease and token fences, the
history entries, the dedupe-key check and the signals are the same whoever acts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from jobqueue.errors import JobNotFound
from jobqueue.models import Job
from jobqueue.ops import repairs as client
from jobqueue.states import JobState

#: Ids per call to the client in a bulk action (and per progress report).
CHUNK = 1000
#: Rows handled per transaction by the per-row actions: one commit per chunk, not per row, and
#: no lock held for long.
CHUNK_SIZE = 500


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


def _chunks(ids: Sequence[int], size: int = CHUNK) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


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
    """Cancel jobs (``client.cancel_many``, a thousand ids a call); a running one is asked to stop.

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
        result = client.cancel_many(chunk, by=by, using=using)
        outcome.done.extend(sorted((*result.cancelled, *result.requested)))
        for job_id in result.skipped:
            outcome.skipped[job_id] = "finished or already cancelling"
        outcome.missing.extend(result.missing)
        handled += len(chunk)
        if progress is not None:
            progress(handled)
    return outcome


@dataclass
class ActionReport:
    """What one bulk action did, job by job."""

    done: list[int] = field(default_factory=list)
    #: Done, but not yet final: a running job asked to cancel.
    requested: list[int] = field(default_factory=list)
    #: id -> the state it is in now, for jobs no longer eligible.
    changed: dict[int, str] = field(default_factory=dict)
    duplicate: list[int] = field(default_factory=list)
    #: id -> the live job holding its dedupe key, for ``duplicate`` jobs.
    holders: dict[int, int] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    #: id -> state now, for jobs eligible when the confirmation page showed them but no longer.
    changed_since_confirmed: dict[int, str] = field(default_factory=dict)
    #: Whether the action was handed any id (then "0 done" is said, not left out).
    attempted: bool = False


def job_states(ids: Iterable[int], using: str) -> dict[int, str]:
    """Return job id -> its state now, for the ids that name a job (one read)."""
    return dict(Job.objects.using(using).filter(id__in=list(ids)).values_list("id", "state"))


def _per_row(
    ids: Sequence[int], using: str, call: Callable[[int], bool], outcome: ActionReport
) -> list[int]:
    """Call ``call(id)`` for each id, a transaction per chunk; return the ids it refused."""
    refused: list[int] = []
    for chunk in _chunks(ids, CHUNK_SIZE):
        with transaction.atomic(using=using):
            for job_id in chunk:
                try:
                    if call(job_id):
                        outcome.done.append(job_id)
                    else:
                        refused.append(job_id)
                except JobNotFound:
                    outcome.missing.append(job_id)
    return refused


def cancel_jobs(ids: Sequence[int], using: str, by: Any = None) -> ActionReport:
    """Cancel each job with ``client.cancel``; a running job may end up "cancel requested"."""
    outcome = ActionReport()
    refused = _per_row(ids, using, lambda i: client.cancel(i, by=by, using=using), outcome)
    outcome.changed.update(job_states(refused, using))
    outcome.missing.extend(set(refused) - set(outcome.changed))
    # Whether a running job is cancelled at once or asked to stop is the client's business; say
    # which happened by what the row shows now.
    still_running = {
        job_id
        for job_id, state in job_states(outcome.done, using).items()
        if state == JobState.LEASED
    }
    outcome.requested = [i for i in outcome.done if i in still_running]
    outcome.done = [i for i in outcome.done if i not in still_running]
    return outcome


def retry_jobs(ids: Sequence[int], using: str, by: Any = None) -> ActionReport:
    """Retry the jobs with ``client.retry_many`` (per row what ``client.retry`` does)."""
    result = client.retry_many(ids, by=by, using=using)
    return ActionReport(
        done=list(result.retried),
        changed=dict(result.not_retryable),
        duplicate=list(result.duplicate),
        holders=dict(result.holders),
        missing=list(result.missing),
    )


def run_jobs_now(ids: Sequence[int], using: str, by: Any = None) -> ActionReport:
    """Make each scheduled job ready now with ``client.run_now``."""
    outcome = ActionReport()
    refused = _per_row(ids, using, lambda i: client.run_now(i, by=by, using=using), outcome)
    outcome.changed.update(job_states(refused, using))
    outcome.missing.extend(set(refused) - set(outcome.changed))
    return outcome
