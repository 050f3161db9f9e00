"""Producer and operator side: validate input, then hand it to the store.

``enqueue`` joins the caller's transaction on the queue's database (``using``), so the job row
commits or rolls back with the caller's business data.
"""

from __future__ import annotations

import math
import random
import traceback as traceback_module
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from . import signals
from .backoff import backoff_delay
from .conf import get_settings, validate_queue_name
from .errors import MAX_DELAY_SECONDS, InvalidJobOption, InvalidPayload, QueueUnavailable
from .fairness import QueueSelector, TenantCaps
from .jobs import JobType, registered, signature_of
from .payloads import sanitize_text, to_json
from .states import DeadReason, JobState
from .store import ClaimedJob, NewJob, get_store

__all__ = [
    "BulkRetry",
    "ack",
    "cancel",
    "claim",
    "enqueue",
    "enqueue_many",
    "heartbeat",
    "nack",
    "retry",
    "retry_many",
    "run_now",
]

PRIORITY_MIN, PRIORITY_MAX = -100, 100
MAX_ATTEMPTS_LIMIT = 10_000
TRACEBACK_TAIL_CHARS = 4000
ERROR_MESSAGE_CHARS = 2000
ERROR_TYPE_CHARS = 200


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - any __str__ may raise; the type still tells something
        return f"<unprintable {type(value).__qualname__}>"


def validate_options(
    *,
    queue: Any = None,
    priority: Any = None,
    max_attempts: Any = None,
    timeout_s: Any = None,
) -> None:
    """Check enqueue options that also appear as ``@job`` defaults. None means "not given".

    Raises:
        InvalidJobOption: naming the option and the bad value.
    """
    if queue is not None:
        _queue_option(queue)
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        raise InvalidJobOption(
            "priority", f"must be an integer in {PRIORITY_MIN}..{PRIORITY_MAX}, got {priority!r}"
        )
    if max_attempts is not None and (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    ):
        raise InvalidJobOption(
            "max_attempts", f"must be an integer in 1..{MAX_ATTEMPTS_LIMIT}, got {max_attempts!r}"
        )
    if timeout_s is not None and (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise InvalidJobOption("timeout_s", f"must be a number of seconds > 0, got {timeout_s!r}")


def _queue_option(queue: Any) -> None:
    try:
        validate_queue_name(queue)
    except ValueError as exc:
        raise InvalidJobOption("queue", str(exc)) from None


def _lease_option(lease_s: Any) -> float:
    # NaN and infinity pass "> 0" but make PostgreSQL fail mid-transaction ("interval out of
    # range"), so the caller's transaction would be aborted instead of getting a clear error.
    lease = get_settings().lease_seconds if lease_s is None else lease_s
    if (
        isinstance(lease, bool)
        or not isinstance(lease, int | float)
        or not math.isfinite(lease)
        or lease <= 0
    ):
        raise InvalidJobOption("lease_s", f"must be a number of seconds > 0, got {lease_s!r}")
    return float(lease)


def _text_option(name: str, value: Any, max_length: int, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or len(value) > max_length or "\x00" in value:
        raise InvalidJobOption(
            name, f"must be a string of at most {max_length} characters without NUL, got {value!r}"
        )


def _run_at(run_at: Any, delay: Any, name: str = "run_at") -> tuple[datetime | None, float]:
    if run_at is not None and delay is not None:
        raise InvalidJobOption(name, "give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidJobOption(name, f"must be a datetime, got {run_at!r}")
        if timezone.is_naive(run_at):
            if django_settings.USE_TZ:
                raise InvalidJobOption(
                    name,
                    f"{run_at.isoformat()} is naive but USE_TZ is True; pass an aware datetime "
                    "(e.g. django.utils.timezone.now() + timedelta(...))",
                )
            run_at = timezone.make_aware(run_at)
        return run_at, 0.0
    if delay is None:
        return None, 0.0
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise InvalidJobOption("delay", f"must be seconds or a timedelta, got {delay!r}")
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise InvalidJobOption(
            "delay", f"must be between 0 and {MAX_DELAY_SECONDS:.0f} seconds, got {delay!r}"
        )
    return None, seconds


def _check_arguments(job_type: JobType | None, payload: dict[Any, Any]) -> None:
    """Refuse a payload its handler cannot be called with (known handlers only).

    A missing or unexpected argument would otherwise fail on every attempt, long after the
    caller could have fixed it. Types unknown in this process (another service's) are not
    checked.
    """
    if job_type is None:
        return
    signature = signature_of(job_type.func)
    if signature is None:
        return
    args = (None,) if job_type.takes_context else ()
    # Only the names matter, as the handler will get them after the JSON round trip.
    names = dict.fromkeys(str(key) for key in payload)
    try:
        signature.bind(*args, **names)
    except TypeError as exc:
        raise InvalidPayload("payload", f"does not fit {job_type.name}{signature}: {exc}") from None


def _job_id(job_id: Any) -> int:
    # A job id is a positive integer; anything else names no job (rather than a database error).
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
        from .errors import JobNotFound

        raise JobNotFound(job_id)
    return job_id


@contextmanager
def _writing(using: str | None) -> Iterator[None]:
    """Turn a lost database into ``QueueUnavailable``; let SQLSTATE class 40 through.

    A serialization failure or deadlock is not an outage: the database asks the caller to retry
    its transaction, and retry wrappers look for that very error (e.g. a dedupe key committed by
    a competitor under REPEATABLE READ).
    """
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        if (getattr(exc.__cause__, "sqlstate", None) or "").startswith("40"):
            raise
        raise QueueUnavailable(
            f"queue database {using or 'default'!r} is unavailable: {exc}"
        ) from exc


def _send_enqueued(job: NewJob, job_id: int, using: str | None) -> None:
    """Send ``job_enqueued`` for a job that was inserted (not for a dedupe hit)."""
    if not signals.job_enqueued.has_listeners():
        return
    from .models import Job

    signals.job_enqueued.send(
        sender=Job,
        job_id=job_id,
        job_type=job.type,
        queue=job.queue,
        priority=job.priority,
        run_at=job.run_at,
        tenant_id=job.tenant_id,
        using=using or "default",
    )


def enqueue(
    queue: str,
    job_type: str | JobType,
    payload: dict[str, Any] | None = None,
    *,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    priority: int | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    tenant_id: str = "",
    ordering_key: str | None = None,
    using: str | None = None,
) -> int:
    """Put a job on a queue, in the caller's transaction, and return its id.

    Args:
        queue: queue name, ``[A-Za-z0-9_.:-]{1,100}``.
        job_type: a registered type name, or the object ``@job`` returned.
        payload: a JSON object of the handler's keyword arguments (default ``{}``).
        run_at: aware datetime from which the job may run; in the past means now.
        delay: seconds (or a timedelta) from now, by the database clock; exclusive with run_at.
        priority: -100..100, higher runs sooner; default the type's, else 0.
        dedupe_key: while a job of this queue with this key is ready, scheduled or leased,
            enqueue returns that job's id and writes nothing.
        max_attempts: claims before dead-lettering (>= 1); default the type's, else the setting.
        timeout_s: hard limit on one run, seconds; default the type's, else the setting.
        tenant_id: the tenant the job belongs to ("" for none); claims share workers fairly
            between tenants and honour ``TENANT_MAX_RUNNING``.
        ordering_key: jobs with the same key (any queue) run one at a time, in enqueue order,
            across all workers; a retrying job holds its key until it succeeds, is cancelled or
            goes dead. None for no key.
        using: database alias of the queue; default ``"default"``.

    Returns:
        The new job's id, or the live job's id when ``dedupe_key`` is already held.

    Raises:
        InvalidPayload: the payload is not JSON (the message names the path), holds a NUL or a
            lone surrogate, or is over ``MAX_PAYLOAD_BYTES``.
        InvalidJobOption: a bad queue, priority, run_at (naive under USE_TZ), delay,
            max_attempts, timeout_s, tenant_id, dedupe_key or ordering_key.
        QueueUnavailable: the database cannot be reached; nothing was written.
        django.db.OperationalError: a serialization failure or deadlock (SQLSTATE 40xxx) in
            the caller's transaction; retry the transaction.
    """
    return enqueue_or_get(
        queue,
        job_type,
        payload,
        run_at=run_at,
        delay=delay,
        priority=priority,
        dedupe_key=dedupe_key,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        tenant_id=tenant_id,
        ordering_key=ordering_key,
        using=using,
    )[0]


def enqueue_or_get(
    queue: str,
    job_type: str | JobType,
    payload: dict[str, Any] | None = None,
    *,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    priority: int | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    tenant_id: str = "",
    ordering_key: str | None = None,
    using: str | None = None,
) -> tuple[int, bool]:
    """Internal: :func:`enqueue`, returning ``(job_id, created)``.

    ``created`` is False when a live job held ``dedupe_key`` and its id was returned. Sends
    ``job_enqueued`` for a new row only.
    """
    new_job = _new_job(
        queue,
        job_type,
        payload,
        run_at=run_at,
        delay=delay,
        priority=priority,
        dedupe_key=dedupe_key,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        tenant_id=tenant_id,
        ordering_key=ordering_key,
    )
    with _writing(using):
        job_id, created = get_store(using).enqueue_or_get(new_job)
    if created:
        _send_enqueued(new_job, job_id, using)
    return job_id, created


#: The keys one job of :func:`enqueue_many` may have: :func:`enqueue`'s arguments but ``using``.
ENQUEUE_MANY_KEYS = (
    "queue",
    "job_type",
    "payload",
    "run_at",
    "delay",
    "priority",
    "dedupe_key",
    "max_attempts",
    "timeout_s",
    "tenant_id",
    "ordering_key",
)


def enqueue_many(jobs: Iterable[Mapping[str, Any]], *, using: str | None = None) -> list[int]:
    """Put many jobs on their queues in the caller's transaction; return their ids in order.

    Every job is validated before anything is written, so one bad job writes nothing. Then
    they are inserted in one statement per 10,000 jobs on PostgreSQL (one notification per
    queue wakes the workers at commit), or one by one in one transaction elsewhere.

    Dedupe keys work as in :func:`enqueue`: a job whose (queue, dedupe key) a live job holds
    gets that job's id and writes nothing, and jobs of one call that share a (queue, dedupe key)
    become one job (the first of them), whose id each of them gets.

    Example::

        jobqueue.enqueue_many(
            {"queue": "emails", "job_type": "shop.jobs.send_receipt", "payload": {"order": pk}}
            for pk in order_ids
        )

    Args:
        jobs: one mapping per job, of :func:`enqueue`'s keyword arguments (``queue`` and
            ``job_type`` required; the others optional; see :data:`ENQUEUE_MANY_KEYS`).
        using: database alias of the queues; default ``"default"``.

    Returns:
        One id per input job, in input order (repeated ids where dedupe keys matched).

    Raises:
        InvalidJobOption: a job is not a mapping, lacks ``queue`` or ``job_type``, has an
            unknown key, or has a bad option; ``option`` names it as ``jobs[<index>].<key>``.
        InvalidPayload: a payload is not JSON; ``path`` starts with ``jobs[<index>]``.
        QueueUnavailable: the database cannot be reached; nothing was written.
        django.db.OperationalError: a serialization failure or deadlock (SQLSTATE 40xxx) in
            the caller's transaction; retry the transaction.
    """
    new_jobs: list[NewJob] = []
    memo: dict[Any, Any] = {}
    for index, spec in enumerate(jobs):
        where = f"jobs[{index}]"
        if not isinstance(spec, Mapping):
            raise InvalidJobOption(
                where, f"must be a dict of enqueue arguments, got {type(spec).__name__}"
            )
        unknown = sorted(map(str, set(spec) - set(ENQUEUE_MANY_KEYS)))
        if unknown:
            raise InvalidJobOption(
                where,
                f"unknown keys: {', '.join(unknown)} (known: {', '.join(ENQUEUE_MANY_KEYS)})",
            )
        missing = [key for key in ("queue", "job_type") if key not in spec]
        if missing:
            raise InvalidJobOption(where, f"needs {' and '.join(missing)}")
        try:
            new_jobs.append(_new_job(**spec, memo=memo))
        except InvalidPayload as exc:
            raise InvalidPayload(f"{where}.{exc.path}", exc.problem) from None
        except InvalidJobOption as exc:
            raise InvalidJobOption(f"{where}.{exc.option}", exc.problem) from None
    if not new_jobs:
        return []
    with _writing(using):
        results = get_store(using).enqueue_many(new_jobs)
    for job, (job_id, created) in zip(new_jobs, results, strict=True):
        if created:
            _send_enqueued(job, job_id, using)
    return [job_id for job_id, _ in results]


def _new_job(
    queue: str,
    job_type: str | JobType,
    payload: dict[str, Any] | None = None,
    *,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    priority: int | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    tenant_id: str = "",
    ordering_key: str | None = None,
    memo: dict[Any, Any] | None = None,
) -> NewJob:
    """Validate :func:`enqueue`'s arguments and return the job to insert (writes nothing).

    ``memo`` (a dict kept across the calls of one :func:`enqueue_many`) remembers the checks
    whose answer depends only on the queue name, or on the job type and the payload's keys.

    Raises:
        InvalidPayload, InvalidJobOption: as :func:`enqueue` documents.
    """
    conf = get_settings()
    type_defaults = job_type if isinstance(job_type, JobType) else None
    type_name = job_type.name if isinstance(job_type, JobType) else job_type
    _text_option("job_type", type_name, 200, allow_none=False)
    if not type_name:
        raise InvalidJobOption("job_type", "must not be empty")
    if priority is None:
        priority = type_defaults.priority if type_defaults else 0
    if max_attempts is None:
        max_attempts = (type_defaults and type_defaults.max_attempts) or conf.max_attempts
    if timeout_s is None:
        timeout_s = (type_defaults and type_defaults.timeout_s) or conf.timeout_seconds
    # The queue is required here: validate_options would read None as "not given", and the
    # insert would then fail on NOT NULL and abort the caller's transaction.
    if memo is None or not isinstance(queue, str) or ("queue", queue) not in memo:
        _queue_option(queue)
        if memo is not None:
            memo["queue", queue] = True
    validate_options(priority=priority, max_attempts=max_attempts, timeout_s=timeout_s)
    _text_option("tenant_id", tenant_id, 100, allow_none=False)
    _text_option("dedupe_key", dedupe_key, 200, allow_none=True)
    if dedupe_key == "":
        # An empty key would silently merge unrelated jobs of the queue into one.
        raise InvalidJobOption("dedupe_key", "must be a non-empty string, or None for no key")
    _text_option("ordering_key", ordering_key, 200, allow_none=True)
    if ordering_key == "":
        # An empty key would chain every keyless-looking job of the site into one line.
        raise InvalidJobOption("ordering_key", "must be a non-empty string, or None for no key")
    when, delay_s = _run_at(run_at, delay)
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidJobOption(
            "payload", f"must be a dict of keyword arguments, got {type(payload).__name__}"
        )
    payload_json = to_json(payload, max_bytes=conf.max_payload_bytes)
    if memo is None:
        _check_arguments(type_defaults or registered(type_name), payload)
    else:
        # The same job type with the same argument names binds the same way every time.
        key = ("args", type_defaults or type_name, tuple(payload))
        if key not in memo:
            _check_arguments(type_defaults or registered(type_name), payload)
            memo[key] = True
    return NewJob(
        queue=queue,
        type=type_name,
        payload_json=payload_json,
        priority=priority,
        tenant_id=tenant_id,
        run_at=when,
        delay_s=delay_s,
        max_attempts=max_attempts,
        timeout_s=float(timeout_s),
        dedupe_key=dedupe_key,
        ordering_key=ordering_key,
    )


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
    worker (see the README's "Fairness and priorities").

    Returns:
        The claimed jobs, in the order they were served; each carries its lease token.

    Raises:
        InvalidJobOption: a bad queue name, worker_id, max_jobs or lease_s.
    """
    queues = [queue] if isinstance(queue, str) or queue is None else list(queue)
    if not queues:
        raise InvalidJobOption("queue", "give at least one queue name")
    for name in queues:
        _queue_option(name)
    # worker_id is stored in leased_by (200 characters, no NUL in PostgreSQL text).
    _text_option("worker_id", worker_id, 200, allow_none=False)
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
        raise InvalidJobOption("max_jobs", f"must be an integer >= 1, got {max_jobs!r}")
    lease = _lease_option(lease_s)
    conf = get_settings()
    caps = TenantCaps(conf.tenant_max_running, conf.tenant_max_running_overrides)
    plan = QueueSelector(queues, caps=caps).plan()
    return get_store(using).claim(queues, worker_id, max_jobs, lease, plan=plan)


def heartbeat(
    job_id: int, lease_token: uuid.UUID, *, lease_s: float | None = None, using: str | None = None
) -> datetime:
    """Extend one lease to ``now() + lease_s`` and return the new ``lease_until``.

    Raises:
        LeaseLost: the job is no longer leased under this token.
        InvalidJobOption: ``lease_s`` is not a finite number of seconds > 0.
    """
    from .errors import LeaseLost

    lease = _lease_option(lease_s)
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
        LeaseLost: another claim or the reaper has moved the job; nothing changed.
        InvalidPayload: ``result`` is not JSON.
    """
    result_json = to_json(result, root="result")
    return get_store(using).ack(job_id, lease_token, result_json)


def error_entry(
    error: BaseException | str, *, attempt: int, worker_id: str = "", kind: str = "error"
) -> dict[str, Any]:
    """Build one error-history entry (type, message, traceback tail), safe for PostgreSQL.

    Never raises: recording a failure must not fail. The message keeps its first
    ``ERROR_MESSAGE_CHARS`` characters, the traceback its last ``TRACEBACK_TAIL_CHARS``, the
    type and its path their first ``ERROR_TYPE_CHARS``; the entry holds text only.
    ``type`` is the exception's qualified name and ``exception_class_path`` its importable path
    (``module.qualname``; empty for a plain message), which the ``django.tasks`` backend reports
    as ``TaskError.exception_class_path``.
    """
    if isinstance(error, BaseException):
        error_type = type(error).__qualname__[:ERROR_TYPE_CHARS]
        error_path = f"{type(error).__module__}.{type(error).__qualname__}"[:ERROR_TYPE_CHARS]
        message = _safe_str(error)
        try:
            tb = "".join(traceback_module.format_exception(error))
        except Exception:  # noqa: BLE001 - a broken __str__ can break formatting too
            tb = f"{error_type}: {message}"
    else:
        error_type, error_path, message, tb = "Error", "", _safe_str(error), ""
    if len(message) > ERROR_MESSAGE_CHARS:
        message = f"{message[:ERROR_MESSAGE_CHARS]}... ({len(message)} characters)"
    tb = tb[-TRACEBACK_TAIL_CHARS:]
    return {
        "kind": kind,
        "attempt": attempt,
        "worker": sanitize_text(worker_id),
        "type": sanitize_text(error_type),
        "exception_class_path": sanitize_text(error_path),
        "message": sanitize_text(message),
        "traceback": sanitize_text(tb),
    }


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

    Returns:
        ``"scheduled"`` (will retry) or ``"dead"`` (attempts spent, or a PermanentError).

    Raises:
        LeaseLost: the job is no longer leased under this token; nothing changed.
    """
    from .errors import PermanentError

    store = get_store(using)
    if retry_at is not None:
        retry_at, _ = _run_at(retry_at, None, name="retry_at")
    info = store.lease_info(job_id, lease_token)
    entry = error_entry(error, attempt=info.attempts)
    if isinstance(error, PermanentError):
        return store.nack(job_id, lease_token, entry, dead_reason=DeadReason.PERMANENT_ERROR)
    if info.attempts >= info.max_attempts:
        return store.nack(job_id, lease_token, entry, dead_reason=DeadReason.ATTEMPTS_EXHAUSTED)
    if retry_at is not None:
        return store.nack(job_id, lease_token, entry, dead_reason=None, retry_at=retry_at)
    delay = backoff_for(info.job_type, info.attempts)
    return store.nack(job_id, lease_token, entry, dead_reason=None, delay_s=delay)


def cancel(job_id: int, *, using: str | None = None) -> bool:
    """Cancel a ready, scheduled, leased or dead job (an operator action).

    A ready, scheduled or dead job is cancelled at once. A leased (running) job gets a cancel
    request: its worker sees it at the next heartbeat (within a third of the lease) and tells the
    handler (``context.cancel_requested``, ``context.should_stop``); whatever the handler then
    returns, the job ends ``cancelled`` and is never run again. If its worker dies first, the
    reaper ends it ``cancelled`` when the lease expires.

    Returns:
        True if the job was cancelled, or its cancel requested, now; False if it had already
        finished or a cancel was already requested (cancelling twice is a no-op).

    Raises:
        JobNotFound: no job has this id.
    """
    job_id = _job_id(job_id)
    state = get_store(using).cancel_or_request(job_id)
    if state == JobState.CANCELLED:
        # A running job's cancel is only requested here; its worker sends the signal when the
        # job ends cancelled.
        from .models import Job

        signals.job_cancelled.send(sender=Job, job_id=job_id, using=using or "default")
    return state is not None


def retry(job_id: int, *, using: str | None = None) -> bool:
    """Send a dead or cancelled job back to ``ready`` now, with a fresh attempt budget.

    Attempts go to 0, the error history is kept and gains a "retried by operator" entry, and
    ``finished_at`` is cleared.

    Returns:
        True if the job was retried; False if it is not dead or cancelled.

    Raises:
        JobNotFound: no job has this id.
        DuplicateJob: a live job now holds the same dedupe key on the same queue.
    """
    return get_store(using).retry(_job_id(job_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkRetry:
    """What :func:`retry_many` did with each id.

    Attributes:
        retried: ids sent back to ``ready``.
        not_retryable: id -> state, for jobs that are not dead or cancelled (now).
        duplicate: ids left dead or cancelled because a live job holds their dedupe key (or
            another id of the same call, with the same key, was retried instead).
        missing: ids of no job.
    """

    retried: tuple[int, ...] = ()
    not_retryable: dict[int, str] = field(default_factory=dict)
    duplicate: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()


#: Ids per statement in :func:`retry_many`.
RETRY_MANY_BATCH = 1000


def retry_many(job_ids: Iterable[int], *, using: str | None = None) -> BulkRetry:
    """Retry many dead or cancelled jobs: for each, exactly what :func:`retry` does.

    The ids go to the store a thousand per statement, not one statement each, so an operator can
    retry thousands of dead letters in one request. Each row is fenced on its state, gets the
    "retried by operator" history entry, and is refused (not raised) when a live job holds its
    dedupe key; when several of the ids share one key, the lowest id is retried.

    Returns:
        A :class:`BulkRetry` saying what happened to every id.
    """
    from .models import Job
    from .states import RETRYABLE

    ids = sorted({int(job_id) for job_id in job_ids})
    store = get_store(using)
    retried: set[int] = set()
    for start in range(0, len(ids), RETRY_MANY_BATCH):
        retried |= store.retry_many(ids[start : start + RETRY_MANY_BATCH])
    rest = [job_id for job_id in ids if job_id not in retried]
    states = dict(
        Job.objects.using(store.alias).filter(id__in=rest).values_list("id", "state")
        if rest
        else []
    )
    return BulkRetry(
        retried=tuple(sorted(retried)),
        not_retryable={i: s for i, s in sorted(states.items()) if s not in RETRYABLE},
        duplicate=tuple(i for i, s in sorted(states.items()) if s in RETRYABLE),
        missing=tuple(i for i in rest if i not in states),
    )


def run_now(job_id: int, *, using: str | None = None) -> bool:
    """Make a ``scheduled`` job (delayed, or waiting for a retry) ``ready`` now.

    Its attempts, history and priority are kept; only ``run_at`` moves to now.

    Returns:
        True if the job is ready now; False if it is not scheduled (e.g. claimed meanwhile).

    Raises:
        JobNotFound: no job has this id.
    """
    return get_store(using).run_now(job_id)


def backoff_for(job_type: str, attempt: int, rng: random.Random | None = None) -> float:
    """Return the retry delay, seconds, for a failed ``attempt`` of ``job_type``.

    Uses the type's ``@job(backoff=...)`` policy when it is registered here, else
    ``JOBQUEUE["BACKOFF"]``. Pass a seeded ``rng`` for repeatable delays.
    """
    from .jobs import registered

    found = registered(job_type)
    policy = (found.backoff if found else None) or get_settings().backoff
    return backoff_delay(attempt, policy, rng)
