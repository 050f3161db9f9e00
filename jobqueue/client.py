"""Producer side: ``@job``, ``enqueue``, ``enqueue_many``, ``step``: validated, then to the store.

The ``@job`` decorator is here, above the registry (:mod:`jobqueue.registry`), because a job
function enqueues itself; the registry sits below the client and never imports it. Operator
actions are ``jobqueue.ops.repairs``; chains of steps, ``jobqueue.flows.chains``.

``enqueue`` joins the caller's transaction on the queue's database (``using``), so the job row
commits or rolls back with the caller's business data. The consumer calls (``claim``,
``heartbeat``, ``ack``, ``nack``) live in :mod:`jobqueue.consumer`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from jobqueue import arguments, outbox, routing, signals
from jobqueue.errors import InvalidJobOption
from jobqueue.flows.dependencies import enqueue_each, parent_options, split_specs
from jobqueue.models import Job
from jobqueue.options import new_job as build_job
from jobqueue.options import new_jobs as build_jobs
from jobqueue.registry import (
    ENQUEUE_OPTIONS,
    JOB_OPTIONS,
    PARENT_OPTIONS,
    EnqueueOptions,
    JobType,
    declare,
)
from jobqueue.store import NewJob, get_store
from jobqueue.store.interface import ENQUEUE_MANY_CHUNK_BYTES
from jobqueue.store.outage import writing as _writing
from jobqueue.tracing import producer_span

__all__ = [
    "STEP_OPTIONS",
    "JobFunction",
    "Step",
    "enqueue",
    "enqueue_many",
    "enqueue_or_get",
    "job",
    "step",
]


def _send_enqueued(job: NewJob, job_id: int, using: str | None) -> None:
    """Send ``job_enqueued`` for a job that was inserted (not for a dedupe hit)."""
    if not signals.job_enqueued.has_listeners():
        return
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
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    using: str | None = None,
    after: Iterable[int] | None = None,
    run_on_parent_failure: bool = False,
    takes_parent_results: bool = False,
) -> int:
    """Put a job on a queue, in the caller's transaction, and return its id.

    Args:
        queue: queue name, ``[A-Za-z0-9_.:-]{1,100}``.
        job_type: a registered type name, or the object ``@job`` returned. Options left None
            take the type's ``@job`` defaults either way (its module is imported if needed),
            then the ``JOBQUEUE`` settings.
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
        concurrency_key: at most ``concurrency_limit`` jobs of this key run at once, across
            all workers; a job whose key is at its limit waits (no attempt spent) and never
            holds up the jobs behind it. Default: the type's ``@job(concurrency_key=)``, or
            the key ``JOBQUEUE["CONCURRENCY_LIMITS"]`` gives its type or dependency.
        concurrency_limit: 1..1,000,000; default the setting's for the key, else the type's.
        using: database alias to store the job on; default: the queue's alias by
            ``JOBQUEUE["QUEUE_DATABASES"]`` (its shard, for a sharded queue), else
            ``"default"``. An explicit alias is used as given, whatever the setting says.
        after: ids of jobs (on ``using``) this one runs after: it waits (state ``waiting``)
            until every one has succeeded, and ends cancelled if one ends dead or cancelled
            (see :mod:`jobqueue.flows.dependencies`). None for none. Not with ``dedupe_key``.
        run_on_parent_failure: with ``after``: a dead or cancelled parent counts as done.
        takes_parent_results: with ``after``: the handler gets ``parent_results``, the
            parents' results in the order of ``after``.
            When an ``atomic()`` block is open on another alias and none on this one, the job
            goes to that alias's outbox in its transaction, and the workers relay it
            (``jobqueue.outbox``).

    Returns:
        The new job's id, or the live job's id when ``dedupe_key`` is already held. Through the
        outbox: the id the job will have once relayed (a held dedupe key is then found by the
        relay, which inserts nothing).

    Raises:
        InvalidPayload: the payload is not JSON (the message names the path), holds a NUL or a
            lone surrogate, or is over ``MAX_PAYLOAD_BYTES``.
        InvalidJobOption: a bad queue, priority, run_at (naive under USE_TZ), delay,
            max_attempts, timeout_s, tenant_id, dedupe_key, ordering_key, concurrency_key
            (or a key function that fails on the payload), concurrency_limit (or a key with
            no limit anywhere) or using.
        UnregisteredJobType: no handler registers ``job_type`` in this process and
            ``JOBQUEUE["ENQUEUE_UNREGISTERED"]`` does not allow it (an ``InvalidJobOption``).
            Also: a bad ``after`` or flag, or a parent id that names no job (nothing written).
        QueueUnavailable: the database cannot be reached; nothing was written.
        django.db.OperationalError: a serialization failure or deadlock (SQLSTATE 40xxx) in
            the caller's transaction; retry the transaction.
    """
    options = EnqueueOptions(
        queue=queue,
        run_at=run_at,
        delay=delay,
        priority=priority,
        dedupe_key=dedupe_key,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        tenant_id=tenant_id,
        ordering_key=ordering_key,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
    )
    return enqueue_or_get(
        job_type,
        payload,
        options,
        using=using,
        after=after,
        run_on_parent_failure=run_on_parent_failure,
        takes_parent_results=takes_parent_results,
    )[0]


def enqueue_or_get(
    job_type: str | JobType,
    payload: dict[str, Any] | None,
    options: EnqueueOptions,
    *,
    using: str | None = None,
    after: Iterable[int] | None = None,
    run_on_parent_failure: bool = False,
    takes_parent_results: bool = False,
    queue_given: bool = True,
) -> tuple[int, bool, datetime]:
    """Internal: :func:`enqueue` with its options as one object; ``(job_id, created, created_at)``.

    Every single-job path enqueues here (``enqueue``, ``JobFunction.enqueue``, chain steps,
    batch members and callbacks, the ``django.tasks`` backend). ``created`` is False when a
    live job held ``dedupe_key`` and its id was returned; ``created_at`` is the returned
    job's, as stored (the database's clock). Sends ``job_enqueued`` for a new row only.

    Args:
        job_type: as :func:`enqueue`.
        payload: as :func:`enqueue`.
        options: the job's options as given; checked and defaulted by
            :func:`jobqueue.options.new_job`.
        using: as :func:`enqueue`.
        after: as :func:`enqueue`.
        run_on_parent_failure: as :func:`enqueue`.
        takes_parent_results: as :func:`enqueue`.
        queue_given: False takes the type's ``@job(queue=)`` for ``options.queue`` None.

    Returns:
        ``(job_id, created, created_at)``.

    Raises:
        As :func:`enqueue`.
    """
    explicit = None if using is None else arguments.alias(using)
    parents = parent_options(
        after,
        run_on_parent_failure=run_on_parent_failure,
        takes_parent_results=takes_parent_results,
        dedupe_key=options.dedupe_key,
    )
    new_job = build_job(
        job_type,
        parents.payload(payload) if parents else payload,
        options,
        queue_given=queue_given,
    )
    # The enqueue's producer span (jobqueue/tracing.py: a no-op without OpenTelemetry); the row
    # keeps its W3C context, for the runs' spans.
    with producer_span([new_job.queue], new_job.type, new_job.tenant_id) as span:
        if span.trace_json is not None:
            new_job = replace(new_job, trace_json=span.trace_json)
        job_id, created, created_at = _enqueue_one(new_job, explicit, parents)
        span.sent([job_id])
    return job_id, created, created_at


def _enqueue_one(new_job: NewJob, explicit: str | None, parents: Any) -> tuple[int, bool, datetime]:
    """Write ``new_job`` (with its parents, if any); :func:`enqueue_or_get`'s return value."""
    using = explicit or _routed(new_job)
    caller = outbox.caller_alias(using)
    if caller is not None:
        # The queue is on another database than the caller's open transaction (issue 16).
        if parents is not None:
            raise InvalidJobOption(
                "after",
                f"a job with parents cannot go through the outbox: an atomic() block is open on "
                f"{caller!r} and none on the queue's database {using!r}; enqueue it inside a "
                f"transaction on {using!r} (its parents are there)",
            )
        return outbox.put(new_job, queue_alias=using, caller=caller)
    with _writing(using):
        if parents is None:
            job_id, created, created_at = get_store(using).enqueue_stamped(new_job)
        else:
            job_id, created_at = get_store(using).enqueue_after(
                new_job,
                parents.after,
                run_on_parent_failure=parents.run_on_parent_failure,
                takes_parent_results=parents.takes_parent_results,
            )
            created = True
    if created:
        _send_enqueued(new_job, job_id, using)
    return job_id, created, created_at


def enqueue_many(
    jobs: Iterable[Mapping[str, Any]],
    *,
    using: str | None = None,
    chunk_bytes: int | None = None,
) -> list[int]:
    """Put many jobs on their queues in the caller's transaction; return their ids in order.

    Every job is validated before anything is written, so one bad job writes nothing. Then
    they are inserted in one statement per 10,000 jobs or ``chunk_bytes`` of them on
    PostgreSQL (one notification per queue wakes the workers at commit), or, 200 jobs or more
    none of which has a dedupe or ordering key, by one COPY after the statement that draws
    their ids; one by one in one transaction elsewhere. Several statements are still all or
    nothing: they run in the caller's transaction (under a savepoint; none for the COPY), or in
    one of their own. Jobs with dedupe keys
    take them in one stable order, so concurrent batches sharing keys never deadlock.

    Dedupe keys work as in :func:`enqueue`: a job whose (queue, dedupe key) a live job holds
    gets that job's id and writes nothing, and jobs of one call that share a (queue, dedupe key)
    become one job (the first of them), whose id each of them gets.

    Jobs whose queue lives on a database where no ``atomic()`` block is open, while one is open
    on an alias of ``OUTBOX_DATABASES``, go to that alias's outbox in its transaction, as with
    :func:`enqueue` (one statement per ``chunk_bytes`` of them; the workers relay them). Their
    ids are the ones the jobs will have; a dedupe key a live job holds on the queue's database
    is found by the relay, which then inserts nothing (the id returned names no job).

    Example::

        jobqueue.enqueue_many(
            {"queue": "emails", "job_type": "shop.jobs.send_receipt", "payload": {"order": pk}}
            for pk in order_ids
        )

    Args:
        jobs: one mapping per job, of :func:`enqueue`'s keyword arguments (``job_type``
            required; ``queue`` too unless the type is registered with ``@job(queue=)``; the
            others optional, and type defaults apply as in :func:`enqueue`; see
            :data:`ENQUEUE_MANY_KEYS`).
        using: database alias of the queues; default: each job's alias by
            ``JOBQUEUE["QUEUE_DATABASES"]``, the batch split into one insert per alias
            (all or nothing per alias; across aliases only with the caller's transactions
            open on each, see docs/scaling.md), else ``"default"``.
        chunk_bytes: most bytes of jobs per statement (>= 1); default
            ``ENQUEUE_MANY_CHUNK_BYTES`` (8 MiB). The client's extra memory stays near it. A
            job larger than it goes in a statement of its own.

    Returns:
        One id per input job, in input order (repeated ids where dedupe keys matched).

    Raises:
        InvalidJobOption: ``jobs`` is not an iterable of mappings, a job lacks ``job_type``
            (or ``queue``, for a type not registered here), has an unknown key, or a bad
            option (``option`` names it as ``jobs[<index>].<key>``); or ``chunk_bytes`` or
            ``using`` is bad. An :class:`~jobqueue.errors.UnregisteredJobType` for a job whose
            type is not registered here (unless ``ENQUEUE_UNREGISTERED`` allows it).
        InvalidPayload: a payload is not JSON, or one job alone is over what one PostgreSQL
            message can carry; ``path`` starts with ``jobs[<index>]``.
        QueueUnavailable: the database cannot be reached; nothing was written.
        django.db.OperationalError: a serialization failure or deadlock (SQLSTATE 40xxx) in
            the caller's transaction; retry the transaction.
    """
    explicit = None if using is None else arguments.alias(using)
    if chunk_bytes is None:
        chunk_bytes = ENQUEUE_MANY_CHUNK_BYTES
    elif isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise InvalidJobOption("chunk_bytes", f"must be an integer >= 1, got {chunk_bytes!r}")
    specs, parents = split_specs(jobs)
    new_jobs = build_jobs(specs)
    if not new_jobs:
        return []
    types = {job.type for job in new_jobs}
    tenants = {job.tenant_id for job in new_jobs}
    with producer_span(
        [job.queue for job in new_jobs],
        next(iter(types)) if len(types) == 1 else None,
        next(iter(tenants)) if len(tenants) == 1 else "",
    ) as span:
        if span.trace_json is not None:
            new_jobs = [replace(job, trace_json=span.trace_json) for job in new_jobs]
        ids = _enqueue_all(new_jobs, parents, explicit, chunk_bytes)
        span.sent(ids)
    return ids


def _enqueue_all(
    new_jobs: list[NewJob], parents: list[Any], explicit: str | None, chunk_bytes: int
) -> list[int]:
    """Write the validated ``new_jobs`` (:func:`enqueue_many`'s body); return their ids."""
    by_alias: dict[str, list[int]] = {}
    for index, job in enumerate(new_jobs):
        by_alias.setdefault(explicit or _routed(job), []).append(index)
    # Where each alias's jobs go: None (straight in) or the caller's alias (its outbox).
    callers = {alias: outbox.caller_alias(alias) for alias in by_alias}
    for alias, indexes in by_alias.items():
        if callers[alias] is not None and any(parents[index] for index in indexes):
            raise InvalidJobOption(
                f"jobs[{next(i for i in indexes if parents[i])}].after",
                f"a job with parents cannot go through the outbox: an atomic() block is open on "
                f"{callers[alias]!r} and none on the queue's database {alias!r}; enqueue it "
                f"inside a transaction on {alias!r} (its parents are there)",
            )
    ids = [0] * len(new_jobs)
    for alias, indexes in by_alias.items():
        batch = [new_jobs[index] for index in indexes]
        batch_parents = [parents[index] for index in indexes]
        caller = callers[alias]
        if caller is not None:
            # The queue is on another database than the caller's open transaction (issue 16).
            relayed = outbox.put_many(
                batch, queue_alias=alias, caller=caller, chunk_bytes=chunk_bytes
            )
            for index, job_id in zip(indexes, relayed, strict=True):
                ids[index] = job_id
            continue
        with _writing(alias):
            if any(batch_parents):
                # Parents are looked up on the job's own alias: a child and its parents
                # share a database (docs/decisions.md, "Queues on several primaries").
                results = enqueue_each(get_store(alias), batch, batch_parents)
            else:
                results = get_store(alias).enqueue_many(batch, chunk_bytes)
        for index, job, (job_id, created) in zip(indexes, batch, results, strict=True):
            ids[index] = job_id
            if created:
                _send_enqueued(job, job_id, alias)
    return ids


def _routed(job: NewJob) -> str:
    """Return the alias ``JOBQUEUE["QUEUE_DATABASES"]`` stores ``job`` on.

    Raises:
        InvalidJobOption: the setting names an alias that is not in ``DATABASES`` (also
            ``manage.py check``'s jobqueue.E022); nothing was written.
    """
    alias = routing.queue_alias(
        job.queue,
        tenant_id=job.tenant_id,
        ordering_key=job.ordering_key,
        dedupe_key=job.dedupe_key,
    )
    if alias not in connections.settings:
        raise InvalidJobOption(
            "using",
            f"JOBQUEUE['QUEUE_DATABASES'] places queue {job.queue!r} on {alias!r}, which is not "
            f"in DATABASES ({', '.join(sorted(connections.settings))})",
        )
    return alias


#: The ``enqueue`` options a step may carry (``after`` is the chain's to set).
STEP_OPTIONS = frozenset({*JOB_OPTIONS, *PARENT_OPTIONS}) - {
    "dedupe_key",
    "concurrency_key",
    "concurrency_limit",
    "after",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One job of a chain, not yet enqueued: its type, payload, options and parent flags."""

    job_type: str | JobType
    payload: dict[str, Any] = field(default_factory=dict)
    options: EnqueueOptions = field(default_factory=EnqueueOptions)
    run_on_parent_failure: bool = False
    takes_parent_results: bool = False


def step(job_type: str | JobType, payload: dict[str, Any] | None = None, **options: Any) -> Step:
    """Return a step of a chain: ``job_type`` with ``payload`` and ``enqueue`` options.

    Args:
        job_type: a registered type name, or the object ``@job`` returned.
        payload: the handler's keyword arguments (default ``{}``).
        **options: :data:`STEP_OPTIONS` (``queue``, ``priority``, ``takes_parent_results``...),
            as :func:`jobqueue.enqueue` takes them.

    Raises:
        InvalidJobOption: an option that is not one of :data:`STEP_OPTIONS`.
    """
    unknown = sorted(set(options) - STEP_OPTIONS)
    if unknown:
        raise InvalidJobOption(
            unknown[0], f"is not a step option (known: {', '.join(sorted(STEP_OPTIONS))})"
        )
    return Step(
        job_type=job_type,
        payload=dict(payload or {}),
        options=EnqueueOptions.pick(options),
        run_on_parent_failure=options.get("run_on_parent_failure", False),
        takes_parent_results=options.get("takes_parent_results", False),
    )


class JobFunction(JobType):
    """What ``@job`` returns: the handler (call it to run it here) and a job type to enqueue."""

    def enqueue(self, **kwargs: Any) -> int:
        """Enqueue a job of this type; payload and options are both keyword arguments.

        Keyword arguments named like :data:`ENQUEUE_OPTIONS` (``run_at``, ``delay``,
        ``priority``, ``dedupe_key``, ``max_attempts``, ``timeout_s``, ``tenant_id``,
        ``ordering_key``, ``concurrency_key``, ``concurrency_limit``, ``using``, ``queue``) are
        options; the rest is the payload passed to
        the handler. Options left out take this type's defaults, then the ``JOBQUEUE`` settings.

        Returns:
            The job id (an existing job's id when its dedupe key is live).

        Raises:
            InvalidPayload, InvalidJobOption: as :func:`jobqueue.enqueue`.
        """
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in ENQUEUE_OPTIONS}
        # Only a queue left out (or None) takes the type's: an empty name is refused as any
        # bad one is, not replaced.
        queue = self.queue if given.get("queue") is None else given["queue"]
        options = EnqueueOptions.pick({**given, "queue": queue})
        parents = {name: given[name] for name in PARENT_OPTIONS if name in given}
        return enqueue_or_get(self, kwargs, options, using=given.get("using"), **parents)[0]

    def step(self, **kwargs: Any) -> Step:
        """Return a step of ``jobqueue.chain`` running this type: payload and options, as enqueue.

        Keyword arguments named like :data:`STEP_OPTIONS` are options; the rest is the payload.

        Raises:
            InvalidJobOption: as :func:`jobqueue.step`.
        """
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in STEP_OPTIONS}
        return step(self, kwargs, **options)


def job(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    backoff: dict[str, Any] | None = None,
    takes_context: bool = False,
    dependency: str | None = None,
    rate_limit: str | float | dict[str, Any] | None = None,
    concurrency_key: str | Callable[..., str | None] | None = None,
    concurrency_limit: int | None = None,
) -> Any:
    """Register a function as a job type. Use as ``@job`` or ``@job(queue="emails", ...)``.

    The handler receives the payload as keyword arguments; with ``takes_context=True`` its first
    positional argument is a :class:`JobContext`.

    Args:
        func: the handler (when used without parentheses).
        name: the type name stored in each job; defaults to the dotted path
            ``module.qualname``, which lets any worker import it on demand.
        queue: default queue for ``.enqueue``.
        priority: default priority, -100..100, higher runs sooner.
        max_attempts: default attempts (>= 1); ``None`` uses ``JOBQUEUE["MAX_ATTEMPTS"]``.
        timeout_s: default hard limit on one run, seconds; ``None`` uses the setting.
        backoff: ``{"policy", "base_seconds", "cap_seconds"}`` for this type's retries.
        takes_context: pass a :class:`JobContext` as the first argument.
        dependency: the service the handler calls (``"partner-api"``), named like a queue;
            several types may share one. Its failures feed that dependency's circuit breaker,
            and while the breaker is open, jobs of the type wait without spending attempts.
        rate_limit: at most this many jobs of the type start, across all workers: ``"10/s"``,
            ``"600/min"``, or ``{"rate": "10/s", "burst": 20}`` (docs/rate-limits.md).
            ``JOBQUEUE["RATE_LIMITS"]["type"]`` overrides it. Every worker that may
            claim the type must have it registered (as for ``dependency``).
        concurrency_key: what at most ``concurrency_limit`` jobs may run of at once, across all
            workers: a fixed key, or a function of the payload's keyword arguments returning
            one (``lambda account_id, **_: f"acct:{account_id}"``) or None (not limited),
            called once at enqueue. Without it, ``concurrency_limit`` limits the type itself.
        concurrency_limit: most leased jobs per key, 1..1,000,000 (``JOBQUEUE
            ["CONCURRENCY_LIMITS"]`` overrides it per key).

    Returns:
        A :class:`JobFunction` (or a decorator producing one).

    Raises:
        ImproperlyConfigured: a bad default, a handler parameter that collides with an enqueue
            option name, or a second registration of the same name by another function.
    """

    def make(f: Callable[..., Any]) -> JobFunction:
        return declare(
            f,
            JobFunction,
            name=name,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            backoff=backoff,
            takes_context=takes_context,
            dependency=dependency,
            rate_limit=rate_limit,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
        )

    return make(func) if func is not None else make
