"""Internal: a job's options: where they meet its type's ``@job`` defaults, and the jobs they make.

DESIGN.md: "Type defaults (@job(max_attempts=..., timeout_s=..., priority=..., queue=...)) apply
however a job of that type is enqueued". Every path that makes a job (``enqueue`` by name or by
object, ``enqueue_many``, ``JobType.enqueue``, cron fires, the ``django.tasks`` backend) builds an
:class:`EnqueueOptions` of what its caller gave and calls :meth:`EnqueueOptions.resolve`: an
explicit option wins, then the registered type's default, then the ``JOBQUEUE`` setting.

It also turns ``enqueue``'s and ``enqueue_many``'s arguments into jobs to insert, with no SQL
(:func:`new_job`, :func:`new_jobs`): everything is checked here, before the store is called, so
bad input writes nothing and leaves the caller's transaction usable.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobqueue import arguments
from jobqueue.arguments import queue_name, validate_options
from jobqueue.errors import InvalidJobOption, InvalidPayload, UnknownJobType, UnregisteredJobType
from jobqueue.limits import concurrency
from jobqueue.payloads import to_json
from jobqueue.registry import (
    JOB_OPTIONS,
    PARENT_OPTIONS,
    JobType,
    registered,
    resolve,
    signature_of,
)
from jobqueue.settings.conf import get_settings
from jobqueue.store.interface import NewJob

__all__ = [
    "ENQUEUE_MANY_KEYS",
    "EnqueueOptions",
    "ResolvedOptions",
    "allows_unregistered",
    "enqueue_type",
    "job_type_of",
    "new_job",
    "new_jobs",
]

logger = logging.getLogger("jobqueue")


def job_type_of(job_type: str | JobType) -> JobType | None:
    """Return the registered type a name stands for, importing its module if needed.

    A dotted name whose module is not imported yet in this process (a producer that never
    imported the handler) is imported here, as a worker would, so its defaults apply. A name
    that nothing registers (another service's type), or whose module fails to import here
    (it needs what only the workers have installed), has no defaults in this process: the
    settings apply, and the failed import is logged at DEBUG.
    """
    if isinstance(job_type, JobType):
        return job_type
    found = registered(job_type)
    if found is not None:
        return found
    try:
        return resolve(job_type)
    except UnknownJobType:
        return None
    except Exception as exc:  # noqa: BLE001 - any import error: the producer may lack its deps
        logger.debug("job type %r: module did not import here (%s); no defaults", job_type, exc)
        return None


def allows_unregistered(type_name: str) -> bool:
    """Return whether ``type_name`` may be enqueued here without a registered handler.

    True when ``JOBQUEUE["ENQUEUE_UNREGISTERED"]`` is True or one of its prefixes starts it.
    """
    return type_name.startswith(get_settings().enqueue_unregistered)


def enqueue_type(job_type: str | JobType) -> JobType | None:
    """Return the type a job is enqueued as; the one place that refuses an unregistered type.

    Every enqueue path asks here (``enqueue``, ``enqueue_many``, ``JobType.enqueue``, cron
    fires; the ``django.tasks`` backend registers its task before it enqueues). A type that
    nothing registers in this process would be retried until dead (``unknown_type``) unless a
    worker elsewhere defines it, so it is refused unless ``JOBQUEUE["ENQUEUE_UNREGISTERED"]``
    allows its name (True, or a matching prefix): that is the case of a type defined only in
    the workers' codebase (another service's).

    Args:
        job_type: a type name, or the object ``@job`` returned.

    Returns:
        The registered type (its defaults apply), the object given if the setting allows an
        unregistered one, or None for an allowed name nothing registers here.

    Raises:
        UnregisteredJobType: nothing registers the name here and the setting does not allow
            it; the message says how to register or allow it.
    """
    name = job_type.name if isinstance(job_type, JobType) else job_type
    found = job_type_of(name)
    if found is not None:
        return job_type if isinstance(job_type, JobType) else found
    if not allows_unregistered(name):
        raise UnregisteredJobType(name)
    return job_type if isinstance(job_type, JobType) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedOptions:
    """The options a job is written with: every one filled in and valid."""

    queue: str
    priority: int
    max_attempts: int
    timeout_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """The type-defaultable options a caller gave; None means "not given".

    Attributes:
        queue: queue name.
        priority: -100..100, higher runs sooner.
        max_attempts: claims before dead-lettering (>= 1).
        timeout_s: hard limit on one run, seconds.
    """

    queue: Any = None
    priority: Any = None
    max_attempts: Any = None
    timeout_s: Any = None

    def resolve(self, job_type: JobType | None) -> ResolvedOptions:
        """Fill what was not given from ``job_type``'s defaults, then the settings; validate.

        Args:
            job_type: the registered type (see :func:`job_type_of`), or None for a type not
                known in this process.

        Returns:
            The options to write.

        Raises:
            InvalidJobOption: a bad option, or no queue given and no type default to take.
        """
        conf = get_settings()
        queue = self.queue
        if queue is None:
            if job_type is None:
                raise InvalidJobOption(
                    "queue", "is required for a job type not registered in this process"
                )
            queue = job_type.queue
        priority = self.priority
        if priority is None:
            priority = job_type.priority if job_type is not None else 0
        max_attempts = self.max_attempts
        if max_attempts is None:
            max_attempts = (job_type and job_type.max_attempts) or conf.max_attempts
        timeout_s = self.timeout_s
        if timeout_s is None:
            timeout_s = (job_type and job_type.timeout_s) or conf.timeout_seconds
        queue_name(queue)
        validate_options(priority=priority, max_attempts=max_attempts, timeout_s=timeout_s)
        return ResolvedOptions(
            queue=queue, priority=priority, max_attempts=max_attempts, timeout_s=float(timeout_s)
        )


#: The keys one job of ``enqueue_many`` may have: ``enqueue``'s arguments but ``using``.
ENQUEUE_MANY_KEYS = ("queue", "job_type", "payload", *JOB_OPTIONS[1:])

_KEYS = frozenset(ENQUEUE_MANY_KEYS)


def _check_arguments(job_type: JobType | None, payload: dict[Any, Any]) -> None:
    """Refuse a payload its handler cannot be called with (known handlers only).

    A missing or unexpected argument would otherwise fail on every attempt, long after the
    caller could have fixed it. Types unknown in this process (another service's) are not
    checked.
    """
    if job_type is None:
        return
    # Only the names matter, as the handler will get them after the JSON round trip.
    problem = _binding_problem(job_type, tuple(str(key) for key in payload))
    if problem is not None:
        raise InvalidPayload("payload", problem)


@functools.lru_cache(maxsize=1024)
def _binding_problem(job_type: JobType, names: tuple[str, ...]) -> str | None:
    """Return why a payload of these argument names does not fit the handler, or None.

    Remembered per type object and names (a handler's signature does not change; a type
    registered again is another object): ``inspect`` binding costs more than the rest of a
    single enqueue's checks.
    """
    signature = signature_of(job_type.func)
    if signature is None:
        return None
    args = (None,) if job_type.takes_context else ()
    try:
        signature.bind(*args, **dict.fromkeys(names))
    except TypeError as exc:
        if "batch" in signature.parameters and "batch" not in names:
            # A batch callback enqueued on its own: say so, not only which key is missing
            # (its 'payload' argument reads as if the payload itself were missing).
            return (
                f"has no 'batch': {job_type.name}{signature} looks like a batch callback, which "
                "jobqueue.batch(on_success=..., on_complete=...) calls with batch= and payload=; "
                f"enqueued on its own, give both in the payload ({exc})"
            )
        own = list(signature.parameters.values())[len(args) :]  # not the context
        found = _mismatch(signature.replace(parameters=own), names)
        said = f"{found} ({exc})" if found else str(exc)
        return f"does not fit {job_type.name}{signature}: {said}"
    return None


def _mismatch(signature: inspect.Signature, names: tuple[str, ...]) -> str:
    """Return every unexpected and every missing argument name, or "" if none is found.

    ``bind`` names one problem (the first missing argument); a caller who typed ``order`` for
    ``order_id`` needs to read both (issue 31).
    """
    params = list(signature.parameters.values())
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = {p.name for p in params if p.kind in named}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    unexpected = [] if open_ended else [n for n in names if n not in accepted]
    missing = [
        p.name
        for p in params
        if p.kind in named and p.default is inspect.Parameter.empty and p.name not in names
    ]
    parts = []
    if unexpected:
        parts.append(f"unexpected argument(s) {', '.join(map(repr, unexpected))}")
    if missing:
        parts.append(f"missing required argument(s) {', '.join(map(repr, missing))}")
    return "; ".join(parts)


def _static(
    job_type: str | JobType,
    queue: Any,
    priority: Any,
    max_attempts: Any,
    timeout_s: Any,
    memo: dict[Any, Any],
    queue_given: bool,
) -> tuple[str, JobType | None, ResolvedOptions]:
    """Return ``(type name, registered type, options)``: what a job's type and options resolve to.

    Raises:
        InvalidJobOption, UnregisteredJobType: as :func:`new_job`.
    """
    type_name = job_type.name if isinstance(job_type, JobType) else job_type
    arguments.text("job_type", type_name, 200)
    if not type_name:
        raise InvalidJobOption("job_type", "must not be empty")
    if queue_given:
        arguments.queue_name(queue)
    found_key = ("type", job_type)
    if found_key not in memo:
        memo[found_key] = enqueue_type(job_type)
    found: JobType | None = memo[found_key]
    options = EnqueueOptions(
        queue=queue, priority=priority, max_attempts=max_attempts, timeout_s=timeout_s
    ).resolve(found)
    return type_name, found, options


def new_job(
    queue: str | None,
    job_type: str | JobType,
    payload: dict[str, Any] | None = None,
    *,
    run_at: Any = None,
    delay: Any = None,
    priority: int | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    tenant_id: str = "",
    ordering_key: str | None = None,
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    memo: dict[Any, Any] | None = None,
    queue_given: bool = True,
) -> NewJob:
    """Validate ``enqueue``'s arguments and return the job to insert (writes nothing).

    ``memo`` (a dict kept across the calls of one ``enqueue_many``) remembers the answers that
    depend only on the job type, or on the type and the payload's keys. ``queue_given=False``
    (an ``enqueue_many`` job without a ``queue`` key) takes the type's ``@job(queue=)``; a
    queue given as None is refused, as any bad queue name.

    Raises:
        InvalidPayload, InvalidJobOption: as ``jobqueue.enqueue`` documents.
        UnregisteredJobType: the type is not registered here and the settings do not allow it
            (:func:`~jobqueue.options.enqueue_type`).
    """
    memo = {} if memo is None else memo
    # The checks and defaults that depend only on the type and the type-defaultable options
    # run once per distinct combination in a batch (a 10,000-job batch of one type: once).
    # The types are part of the key: True == 1 and 2.0 == 2, yet bools and floats are refused.
    static_key: Any = (
        job_type,
        queue_given,
        queue,
        type(priority),
        type(max_attempts),
        type(timeout_s),
        priority,
        max_attempts,
        timeout_s,
    )
    try:
        static = memo.get(static_key)
    except TypeError:  # an unhashable option: checked (and refused) below, never remembered
        static, static_key = None, None
    if static is None:
        static = _static(job_type, queue, priority, max_attempts, timeout_s, memo, queue_given)
        if static_key is not None:
            memo[static_key] = static
    type_name, found, options = static
    arguments.text("tenant_id", tenant_id, 100)
    arguments.key("dedupe_key", dedupe_key)
    arguments.key("ordering_key", ordering_key)
    when, delay_s = arguments.run_at(run_at, delay)
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidJobOption(
            "payload", f"must be a dict of keyword arguments, got {type(payload).__name__}"
        )
    conf = get_settings()
    payload_json = to_json(payload, max_bytes=conf.max_payload_bytes)
    # The same job type with the same argument names binds the same way every time.
    args_key = ("args", found, tuple(payload))
    if args_key not in memo:
        _check_arguments(found, payload)
        memo[args_key] = True
    key, limit = concurrency.resolve(
        conf, found, type_name, payload, concurrency_key, concurrency_limit
    )
    return NewJob(
        queue=options.queue,
        type=type_name,
        payload_json=payload_json,
        priority=options.priority,
        tenant_id=tenant_id,
        run_at=when,
        delay_s=delay_s,
        max_attempts=options.max_attempts,
        timeout_s=options.timeout_s,
        dedupe_key=dedupe_key,
        ordering_key=ordering_key,
        concurrency_key=key,
        concurrency_limit=limit,
    )


def new_jobs(specs: Iterable[Mapping[str, Any]]) -> list[NewJob]:
    """Validate every job of an ``enqueue_many`` call; return them in order (writes nothing).

    Raises:
        InvalidJobOption: a job is not a mapping, lacks ``job_type`` (or ``queue`` where its
            type has no default), has an unknown key, or a bad option; ``option`` names it as
            ``jobs[<index>].<key>``.
        InvalidPayload: a payload is not JSON; ``path`` starts with ``jobs[<index>]``.
        UnregisteredJobType: a job's type is not registered here and the settings do not
            allow it; ``option`` is ``jobs[<index>].job_type``.
    """
    if isinstance(specs, Mapping | str | bytes) or not isinstance(specs, Iterable):
        raise InvalidJobOption("jobs", f"must be an iterable of job dicts, got {specs!r:.100}")
    built: list[NewJob] = []
    memo: dict[Any, Any] = {}
    for index, spec in enumerate(specs):
        where = f"jobs[{index}]"
        if not isinstance(spec, Mapping):
            raise InvalidJobOption(
                where, f"must be a dict of enqueue arguments, got {type(spec).__name__}"
            )
        if not _KEYS.issuperset(spec):
            unknown = sorted(map(str, set(spec) - _KEYS))
            known = ", ".join((*ENQUEUE_MANY_KEYS, *PARENT_OPTIONS))
            raise InvalidJobOption(where, f"unknown keys: {', '.join(unknown)} (known: {known})")
        if "job_type" not in spec:
            raise InvalidJobOption(where, "needs job_type")
        try:
            given = "queue" in spec
            built.append(new_job(**{"queue": None, **spec}, memo=memo, queue_given=given))
        except InvalidPayload as exc:
            raise InvalidPayload(f"{where}.{exc.path}", exc.problem) from None
        except UnregisteredJobType as exc:
            raise UnregisteredJobType(exc.job_type, f"{where}.{exc.option}") from None
        except InvalidJobOption as exc:
            raise InvalidJobOption(f"{where}.{exc.option}", exc.problem) from None
    return built
