"""Results: ``jobqueue.status``, ``jobqueue.result`` and ``jobqueue.wait``.

Reads of one job's row (by primary key), and a wait that sleeps until the job finishes:

* On PostgreSQL with ``LISTEN_NOTIFY`` (the default), :func:`wait` LISTENs on its own connection
  (``jobqueue/store/waiting.py``) and marks the job as watched (``Store.watch``); the statement
  that finishes the job notifies at commit, and the waiter reads the row once. A safety read
  every :data:`LISTEN_RECHECK_S` covers a lost notification (a dropped connection).
* Elsewhere (SQLite, ``LISTEN_NOTIFY: False`` behind a transaction pooler, or a listening
  connection that cannot be opened) it polls: reads 50 ms apart at first, backing off to
  ``poll_s`` (default ``POLL_INTERVAL_SECONDS``) between reads.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import connections

from jobqueue import arguments
from jobqueue.errors import JobCancelled, JobFailed, JobNotFound, JobQueueError, WaitTimeout
from jobqueue.flows.status import JobResult, JobStatus, Progress
from jobqueue.models import Job
from jobqueue.settings.conf import get_settings
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.pooler import listen_alias
from jobqueue.store.waiting import FinishListener

__all__ = ["result", "status", "wait"]

logger = logging.getLogger("jobqueue.results")

#: With LISTEN, how long a waiter trusts the notification before reading the row anyway, s.
LISTEN_RECHECK_S = 30.0
#: Without LISTEN, the first gap between reads, seconds; it doubles up to ``poll_s``.
FIRST_POLL_S = 0.05

_STATUS_FIELDS = (
    "id",
    "type",
    "queue",
    "state",
    "attempts",
    "max_attempts",
    "progress_done",
    "progress_total",
    "checkpoint_at",
    "cancel_requested_at",
    "dead_reason",
    "errors",
    "created_at",
    "started_at",
    "finished_at",
)


def _row(job_id: Any, using: str | None, fields: tuple[str, ...]) -> dict[str, Any]:
    alias = arguments.alias(using)
    job_id = arguments.job_id(job_id)
    row = Job.objects.using(alias).filter(id=job_id).values(*fields).first()
    if row is None:
        raise JobNotFound(job_id)
    return row


def status(job_id: int, *, using: str | None = None) -> JobStatus:
    """Return where job ``job_id`` stands: state, attempts, progress, last error.

    Args:
        job_id: the id ``enqueue`` returned.
        using: the job's database alias (default ``"default"``).

    Returns:
        A :class:`~jobqueue.flows.status.JobStatus`.

    Raises:
        JobNotFound: no job has this id (never had, or it was pruned).
        InvalidJobOption: ``using`` is not an alias.
    """
    row = _row(job_id, using, _STATUS_FIELDS)
    errors = row["errors"] or []
    done = row["progress_done"]
    return JobStatus(
        id=row["id"],
        job_type=row["type"],
        queue=row["queue"],
        state=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        progress=None if done is None else Progress(done, row["progress_total"]),
        has_checkpoint=row["checkpoint_at"] is not None,
        cancel_requested=row["cancel_requested_at"] is not None,
        dead_reason=row["dead_reason"],
        last_error=errors[-1] if errors else None,
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def result(job_id: int, *, using: str | None = None) -> JobResult:
    """Return what job ``job_id`` produced so far: state, attempts, result, error history.

    Returns at once, finished or not (:func:`wait` blocks until it is finished).

    Returns:
        A :class:`~jobqueue.flows.status.JobResult`; its ``result`` is None until it succeeded.

    Raises:
        JobNotFound: no job has this id.
        InvalidJobOption: ``using`` is not an alias.
    """
    row = _row(job_id, using, ("id", "state", "attempts", "result", "errors", "dead_reason"))
    return JobResult(
        id=row["id"],
        state=row["state"],
        attempts=row["attempts"],
        result=row["result"] if row["state"] == JobState.SUCCEEDED else None,
        errors=tuple(row["errors"] or ()),
        dead_reason=row["dead_reason"],
    )


def wait(
    job_id: int,
    timeout: float | None = None,
    *,
    poll_s: float | None = None,
    using: str | None = None,
) -> JobResult:
    """Block until job ``job_id`` is finished and return its result.

    Sleeps on a PostgreSQL notification (see the module docstring), or polls with back-off
    where notifications cannot be used; never reads the row in a tight loop. It refuses to run
    inside a transaction on the job's database (wait after the commit).

    Args:
        job_id: the id ``enqueue`` returned.
        timeout: most seconds to wait (> 0), or None to wait as long as it takes.
        poll_s: without LISTEN, the longest gap between reads, seconds (default
            ``POLL_INTERVAL_SECONDS``); with LISTEN, the safety read's interval (default
            :data:`LISTEN_RECHECK_S`).
        using: the job's database alias.

    Returns:
        The :class:`~jobqueue.flows.status.JobResult` of a succeeded job.

    Raises:
        WaitTimeout: ``timeout`` passed first (the job may still finish later).
        JobFailed: the job ended dead (``.dead_reason``, ``.last_error``).
        JobCancelled: the job ended cancelled (``.last_error``).
        JobNotFound: no job has this id.
        InvalidJobOption: ``timeout``, ``poll_s`` or ``using`` is not valid.
        JobQueueError: called inside a transaction (``atomic()``) on the job's database.
    """
    alias = arguments.alias(using)
    job_id = arguments.job_id(job_id)
    limit = None if timeout is None else arguments.seconds("timeout", timeout)
    gap = None if poll_s is None else arguments.seconds("poll_s", poll_s)
    if connections[alias].in_atomic_block:
        # Its mark would hold the job's row lock until the caller commits, and the worker
        # finishing the job would wait on it: neither could go on until the timeout.
        raise JobQueueError(
            f"jobqueue.wait({job_id}) inside a transaction on {alias!r}: wait after the commit "
            "(a job enqueued in the transaction is not visible to workers before it)"
        )
    deadline = None if limit is None else time.monotonic() + limit
    listener = _listener(alias)
    try:
        state = get_store(alias).watch(job_id)
        if state is None:
            raise JobNotFound(job_id)
        delay = FIRST_POLL_S
        # Each read after the first takes the whole result, so the one that finds the job
        # finished is the last read (watch() only says the state).
        done: JobResult | None = None
        while state not in (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(job_id, state, limit or 0.0)
            if listener is not None:
                step = gap or LISTEN_RECHECK_S
                listener.wait_for(job_id, step if left is None else min(step, left))
            else:
                cap = gap or get_settings().poll_interval_seconds
                time.sleep(min(delay, cap) if left is None else min(delay, cap, left))
                delay = min(delay * 2, cap)
            done = result(job_id, using=alias)  # JobNotFound if pruned while we waited
            state = done.state
    finally:
        if listener is not None:
            listener.close()
    return _finished(job_id, done or result(job_id, using=alias))


def _listener(alias: str) -> FinishListener | None:
    """Return a listener for the jobs of ``alias`` where LISTEN can be used, else None (poll).

    Behind a transaction pooler it listens on the alias's ``LISTEN_DATABASE`` (a direct
    connection), or not at all: a LISTEN through the pooler is never notified
    (``store/pooler.listen_alias``, the same rule as the worker's).
    """
    if connections[alias].vendor != "postgresql" or not get_settings().listen_notify:
        return None
    listen_on = listen_alias(alias)
    if listen_on is None:
        return None
    try:
        return FinishListener(listen_on)
    except Exception as exc:  # noqa: BLE001 - any failure to listen means: poll instead
        logger.warning("wait: cannot LISTEN on %r (%s); polling instead", alias, exc)
        return None


def _finished(job_id: int, done: JobResult) -> JobResult:
    """Return the finished job's result ``done``, or raise what its end says."""
    if done.state == JobState.DEAD:
        raise JobFailed(job_id, done.dead_reason, done.last_error)
    if done.state == JobState.CANCELLED:
        raise JobCancelled(job_id, done.last_error)
    return done
