"""Operator actions on jobs: cancel, retry (one or many), run now; each one audited.

The admin's actions, ``manage.py jobqueue`` and :mod:`jobqueue.ops` call these; ``jobqueue``
re-exports them. Enqueueing lives in :mod:`jobqueue.client`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from jobqueue import arguments, signals
from jobqueue.models import Job
from jobqueue.ops import audit
from jobqueue.states import LIVE, RETRYABLE, JobState
from jobqueue.store import Store, get_store
from jobqueue.store.outage import writing as _writing

__all__ = [
    "RETRY_MANY_BATCH",
    "BulkCancel",
    "BulkRetry",
    "cancel",
    "cancel_many",
    "retry",
    "retry_many",
    "run_now",
]


def cancel(job_id: int, *, by: Any = None, using: str | None = None) -> bool:
    """Cancel a ready, scheduled, leased or dead job (an operator action).

    A ready, scheduled or dead job is cancelled at once. A leased (running) job gets a cancel
    request: its worker sees it at the next heartbeat (within a third of the lease) and tells the
    handler (``context.cancel_requested``, ``context.should_stop``); whatever the handler then
    returns, the job ends ``cancelled`` and is never run again. If its worker dies first, the
    reaper ends it ``cancelled`` when the lease expires.

    Returns:
        True if the job was cancelled, or its cancel requested, now; False if it had already
        finished or a cancel was already requested (cancelling twice is a no-op).

    ``by`` is who cancels (a Django user, or a name): the job's history names them, and a user
    gets a ``LogEntry`` (:mod:`jobqueue.ops.audit`).

    Raises:
        JobNotFound: no job has this id (or can have it: not an int in bigint range).
        InvalidJobOption: ``using`` is not an alias, or ``by`` is not a user or a name.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    job_id = arguments.job_id(job_id)
    who = audit.actor_name(by)
    with _writing(using):
        state = get_store(using).cancel_or_request(job_id, who)
    if state is not None:
        said = "Cancelled" if state == JobState.CANCELLED else "Cancel requested"
        _log(by, [job_id], f"{said} by operator.")
    if state == JobState.CANCELLED:
        # A running job's cancel is only requested here; its worker sends the signal when the
        # job ends cancelled.
        signals.job_cancelled.send(sender=Job, job_id=job_id, using=using or "default")
    return state is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkCancel:
    """What :func:`cancel_many` did with each id.

    Attributes:
        cancelled: ids cancelled now.
        requested: ids of running jobs asked to stop (they end cancelled).
        skipped: ids of jobs that had finished or were already asked to stop.
        missing: ids of no job, and values no job can have as its id.
    """

    cancelled: tuple[int, ...] = ()
    requested: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()
    missing: tuple[Any, ...] = ()


def cancel_many(job_ids: Iterable[int], *, by: Any = None, using: str | None = None) -> BulkCancel:
    """Cancel many jobs: for each, exactly what :func:`cancel` does.

    The ids go to the store a thousand per statement (:data:`RETRY_MANY_BATCH`), not one
    statement each: 20,000 cancels took 21 s one by one (issue 33), as :func:`retry_many`.

    Returns:
        A :class:`BulkCancel` saying what happened to every id.

    Raises:
        InvalidJobOption: ``job_ids`` is not an iterable (a string is refused), or ``using`` is
            not an alias; nothing was cancelled.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    valid, impossible = arguments.job_ids(job_ids)
    ids = sorted(set(valid))
    who = audit.actor_name(by)
    store = get_store(using)
    done: dict[int, str] = {}
    with _writing(using):
        for start in range(0, len(ids), RETRY_MANY_BATCH):
            done.update(store.cancel_many(ids[start : start + RETRY_MANY_BATCH], who))
        rest = [job_id for job_id in ids if job_id not in done]
        found = set(Job.objects.using(store.alias).filter(id__in=rest).values_list("id", flat=True))
    cancelled = tuple(i for i, state in sorted(done.items()) if state == JobState.CANCELLED)
    requested = tuple(i for i, state in sorted(done.items()) if state != JobState.CANCELLED)
    _log(by, cancelled, "Cancelled by operator.")
    _log(by, requested, "Cancel requested by operator.")
    if signals.job_cancelled.has_listeners(Job):
        for job_id in cancelled:
            signals.job_cancelled.send(sender=Job, job_id=job_id, using=using or "default")
    return BulkCancel(
        cancelled=cancelled,
        requested=requested,
        skipped=tuple(i for i in rest if i in found),
        missing=(*[i for i in rest if i not in found], *impossible),
    )


def retry(job_id: int, *, by: Any = None, using: str | None = None) -> bool:
    """Send a dead or cancelled job back to ``ready`` now, with a fresh attempt budget.

    Attempts go to 0, the error history is kept and gains a "retried by operator" entry naming
    ``by`` (a Django user, who also gets a ``LogEntry``, or a name), and ``finished_at`` is
    cleared.

    Returns:
        True if the job was retried; False if it is not dead or cancelled.

    Raises:
        JobNotFound: no job has this id.
        DuplicateJob: a live job now holds the same dedupe key on the same queue; its
            ``queue``, ``dedupe_key`` and ``existing_id`` name it. The row is unchanged.
        InvalidJobOption: ``using`` is not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    return _act_on_one(
        job_id, by, using, lambda store, i, who: store.retry(i, who), "Retried by operator."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkRetry:
    """What :func:`retry_many` did with each id.

    Attributes:
        retried: ids sent back to ``ready``.
        not_retryable: id -> state, for jobs that are not dead or cancelled (now).
        duplicate: ids left dead or cancelled because a live job holds their dedupe key (or
            another id of the same call, with the same key, was retried instead).
        holders: for each id of ``duplicate``, the id of the live job holding its key (absent
            if that job finished in the meantime).
        missing: ids of no job, and values no job can have as its id.
    """

    retried: tuple[int, ...] = ()
    not_retryable: dict[int, str] = field(default_factory=dict)
    duplicate: tuple[int, ...] = ()
    holders: dict[int, int] = field(default_factory=dict)
    missing: tuple[Any, ...] = ()


#: Ids per statement in :func:`retry_many`.
RETRY_MANY_BATCH = 1000


def retry_many(job_ids: Iterable[int], *, by: Any = None, using: str | None = None) -> BulkRetry:
    """Retry many dead or cancelled jobs: for each, exactly what :func:`retry` does.

    The ids go to the store a thousand per statement, not one statement each, so an operator can
    retry thousands of dead letters in one request. Each row is fenced on its state, gets the
    "retried by operator" history entry, and is refused (not raised) when a live job holds its
    dedupe key; when several of the ids share one key, the lowest id is retried. ``by`` as
    :func:`retry`'s.

    Returns:
        A :class:`BulkRetry` saying what happened to every id; a value no job can have as its
        id (not an int in 1..bigint, e.g. ``"abc"``) is reported in ``missing``, as it is.

    Raises:
        InvalidJobOption: ``job_ids`` is not an iterable (a string is refused), or ``using`` is
            not an alias; nothing was retried.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    valid, impossible = arguments.job_ids(job_ids)
    ids = sorted(set(valid))
    who = audit.actor_name(by)
    with _writing(using):
        result = _retry_many(get_store(using), ids, impossible, who)
    _log(by, result.retried, "Retried by operator.")
    return result


def _log(by: Any, job_ids: Iterable[int], message: str) -> None:
    """Record an operator action on jobs in Django's admin history (a user's only)."""
    audit.log(by, Job, ((job_id, f"job #{job_id}") for job_id in job_ids), audit.CHANGE, message)


def _retry_many(store: Store, ids: list[int], impossible: list[Any], who: str) -> BulkRetry:
    retried: set[int] = set()
    for start in range(0, len(ids), RETRY_MANY_BATCH):
        retried |= store.retry_many(ids[start : start + RETRY_MANY_BATCH], who)
    rest = [job_id for job_id in ids if job_id not in retried]
    rows = Job.objects.using(store.alias).filter(id__in=rest) if rest else Job.objects.none()
    found = {i: (s, q, k) for i, s, q, k in rows.values_list("id", "state", "queue", "dedupe_key")}
    duplicate = sorted(i for i, (s, _, _) in found.items() if s in RETRYABLE)
    return BulkRetry(
        retried=tuple(sorted(retried)),
        not_retryable={i: s for i, (s, _, _) in sorted(found.items()) if s not in RETRYABLE},
        duplicate=tuple(duplicate),
        holders=_key_holders(store.alias, {i: found[i][1:] for i in duplicate}),
        missing=(*[i for i in rest if i not in found], *impossible),
    )


def _key_holders(alias: str, keys: dict[int, tuple[str, str | None]]) -> dict[int, int]:
    """Return, per job id, the live job holding its (queue, dedupe key) now."""
    wanted = {key for key in keys.values() if key[1] is not None}
    if not wanted:
        return {}
    match = Q()
    for queue, dedupe_key in wanted:
        match |= Q(queue=queue, dedupe_key=dedupe_key)
    live = Job.objects.using(alias).filter(match, state__in=LIVE)
    holder = {(q, k): i for i, q, k in live.values_list("id", "queue", "dedupe_key")}
    return {i: holder[key] for i, key in keys.items() if key in holder}


def run_now(job_id: int, *, by: Any = None, using: str | None = None) -> bool:
    """Make a ``scheduled`` job (delayed, or waiting for a retry) ``ready`` now.

    Its attempts, history and priority are kept; only ``run_at`` moves to now. ``by`` as
    :func:`retry`'s (the history gains an "operator_run_now" entry).

    Returns:
        True if the job is ready now; False if it is not scheduled (e.g. claimed meanwhile).

    Raises:
        JobNotFound: no job has this id (or can have it: not an int in bigint range).
        InvalidJobOption: ``using`` is not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    return _act_on_one(
        job_id,
        by,
        using,
        lambda store, i, who: store.run_now(i, who),
        "Made ready now by operator.",
    )


def _act_on_one(
    job_id: int,
    by: Any,
    using: str | None,
    act: Callable[[Store, int, str], bool],
    message: str,
) -> bool:
    """Check the arguments, run the store's ``act`` on one job and log ``message`` if it acted.

    Raises:
        JobNotFound, InvalidJobOption, QueueUnavailable: as :func:`retry` and :func:`run_now`.
    """
    using = arguments.alias(using)
    job_id = arguments.job_id(job_id)
    who = audit.actor_name(by)
    with _writing(using):
        acted = act(get_store(using), job_id, who)
    if acted:
        _log(by, [job_id], message)
    return acted
