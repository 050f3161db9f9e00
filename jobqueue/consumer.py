"""Consumer side, for code that drives jobs itself: claim, heartbeat, ack, nack.

A worker does all four for its handlers; these functions let other code lease jobs and report
their outcome under the same rules (the lease token fences every write). Each call validates its
input, then runs in its own short transaction on the queue's database (``using``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption, LeaseLost
from jobqueue.history import error_entry
from jobqueue.limits.fairness import rate_limits
from jobqueue.limits.policy import claim_policy
from jobqueue.masking import mask_entry
from jobqueue.payloads import to_json
from jobqueue.registry import policy_for
from jobqueue.retries import decide
from jobqueue.settings.conf import get_settings
from jobqueue.store import ClaimedJob, Store, get_store
from jobqueue.store.finishing import ack_outcome, finished
from jobqueue.store.outage import writing as _writing
from jobqueue.store.plan import ClaimPlan

__all__ = ["ack", "claim", "heartbeat", "nack"]


def claim(
    queue: str | Sequence[str],
    worker_id: str,
    max_jobs: int,
    *,
    lease_s: float | None = None,
    using: str | None = None,
) -> list[ClaimedJob]:
    """Lease up to ``max_jobs`` due jobs for ``worker_id`` (normally the worker does this).

    Args:
        queue: a queue name or a list of them.
        worker_id: who holds the leases (shown in the admin and the error history).
        max_jobs: most jobs to claim (>= 1).
        lease_s: lease length in seconds; default ``JOBQUEUE["LEASE_SECONDS"]``.
        using: database alias.

    The queues get equal shares, and ``JOBQUEUE["TENANT_MAX_RUNNING"]`` caps hold, as in a
    worker (see docs/fairness.md).

    Returns:
        The claimed jobs, in the order they were served; each carries its lease token.

    Raises:
        InvalidJobOption: a bad queue name, worker_id, max_jobs, lease_s or using.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    if isinstance(queue, str) or queue is None:
        queues = [queue]
    elif isinstance(queue, Iterable) and not isinstance(queue, bytes | Mapping):
        queues = list(queue)
    else:
        raise InvalidJobOption("queue", f"must be a queue name or a list of them, got {queue!r}")
    if not queues:
        raise InvalidJobOption("queue", "give at least one queue name")
    for name in queues:
        arguments.queue_name(name)
    # worker_id is stored in leased_by (200 characters, no NUL in PostgreSQL text).
    arguments.text("worker_id", worker_id, 200)
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or not 1 <= max_jobs <= 10_000:
        raise InvalidJobOption("max_jobs", f"must be an integer in 1..10000, got {max_jobs!r}")
    lease = arguments.lease_seconds(lease_s)
    conf = get_settings()
    caps, limits = claim_policy(conf)
    # A one-off claim has no history of its own to be fair against: equal shares from tag 0,
    # which is the first plan a worker's QueueSelector gives for the same queues.
    plan = replace(ClaimPlan.even(len(queues), caps, limits), rates=rate_limits())
    with _writing(using):
        return get_store(using).claim(queues, worker_id, max_jobs, lease, plan=plan)


def heartbeat(
    job_id: int, lease_token: uuid.UUID, *, lease_s: float | None = None, using: str | None = None
) -> datetime:
    """Extend one lease to ``now() + lease_s`` and return the new ``lease_until``.

    Args:
        job_id: the job (an int).
        lease_token: the token from its claim (a UUID, or its text).
        lease_s: seconds from now; default ``JOBQUEUE["LEASE_SECONDS"]``.
        using: database alias.

    Raises:
        LeaseLost: the job is no longer leased under this token, or no job or lease can have
            this id or token (not an int in bigint range, not a UUID).
        InvalidJobOption: ``lease_s`` is not a finite number of seconds > 0, or ``using`` is
            not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    job_id = arguments.leased_job_id(job_id)
    lease_token = arguments.lease_token(lease_token, job_id)
    lease = arguments.lease_seconds(lease_s)
    with _writing(using):
        kept = get_store(using).extend_leases([(job_id, lease_token)], lease)
    if job_id not in kept:
        raise LeaseLost(job_id)
    return kept[job_id].lease_until


def ack(
    job_id: int, lease_token: uuid.UUID, result: Any = None, *, using: str | None = None
) -> str:
    """Mark a leased job ``succeeded`` and store ``result`` (a JSON value).

    A late ack, after ``lease_until`` but before anyone else took the job, still succeeds. A job
    whose cancel was requested while it ran ends ``cancelled`` (with the result kept).

    Returns:
        The job's new state: ``"succeeded"``, or ``"cancelled"``.

    Raises:
        LeaseLost: another claim or the reaper has moved the job, or no job or lease can have
            this id or token; nothing changed.
        InvalidPayload: ``result`` is not JSON.
        InvalidJobOption: ``using`` is not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    job_id = arguments.leased_job_id(job_id)
    lease_token = arguments.lease_token(lease_token, job_id)
    result_json = to_json(result, root="result")
    outcome = ack_outcome(job_id, lease_token, result_json)
    with _writing(using):
        return finished(get_store(using).finish_many([outcome]), job_id)


def nack(
    job_id: int,
    lease_token: uuid.UUID,
    error: BaseException | str,
    retry_at: datetime | None = None,
    *,
    using: str | None = None,
) -> str:
    """Record a failed attempt; the queue decides whether the job retries or goes dead.

    Args:
        job_id: the job.
        lease_token: the token from its claim.
        error: the exception (its type, message and traceback are recorded) or a message.
        retry_at: aware datetime of the next attempt, honored exactly; default backoff
            (the job type's policy, else ``JOBQUEUE["BACKOFF"]``).
        using: database alias.

    The decision is the workers' own (``jobqueue.retries.decide``): a ``PermanentError`` is dead
    at once; with attempts spent the job is dead; else it retries at ``retry_at``, after a
    ``RetryAfter``'s exact seconds, or after the backoff.

    Returns:
        ``"scheduled"`` (will retry), ``"dead"`` (attempts spent, or a PermanentError), or
        ``"cancelled"`` (its cancel was requested while it ran).

    Raises:
        LeaseLost: the job is no longer leased under this token, or no job or lease can have
            this id or token; nothing changed.
        InvalidJobOption: ``error`` is neither an exception nor a string, ``retry_at`` not an
            aware datetime, or ``using`` not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    job_id = arguments.leased_job_id(job_id)
    lease_token = arguments.lease_token(lease_token, job_id)
    if not isinstance(error, BaseException | str):
        raise InvalidJobOption("error", f"must be an exception or a message, got {error!r:.100}")
    if retry_at is not None:
        retry_at, _ = arguments.run_at(retry_at, None, name="retry_at")
    with _writing(using):
        return _nack(get_store(using), job_id, lease_token, error, retry_at)


def _nack(
    store: Store,
    job_id: int,
    lease_token: uuid.UUID,
    error: BaseException | str,
    retry_at: datetime | None,
) -> str:
    # The decision needs the attempt counters and the type, which only the row has: one fenced
    # read (the token fixes them: no claim can have changed them since), then one fenced write.
    info = store.lease_info(job_id, lease_token)
    outcome = decide(
        job_id,
        lease_token,
        attempt=info.attempts,
        max_attempts=info.max_attempts,
        error=error,
        backoff=policy_for(info.job_type),
        # Masked as the executor's entries are (the key rule: no payload is at hand here).
        entry=mask_entry(error_entry(error, attempt=info.attempts)),
        retry_at=retry_at,
    )
    return finished(store.finish_many([outcome]), job_id)
