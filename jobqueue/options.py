"""Internal: a job's options checked, and the job they make: the one path every enqueue takes.

DESIGN.md: "Type defaults (@job(max_attempts=..., timeout_s=..., priority=..., queue=...)) apply
however a job of that type is enqueued". Every path that makes a job (``enqueue`` by name or by
object, ``enqueue_many``, ``JobType.enqueue``, chains, batches, cron fires, the ``django.tasks``
backend) builds one :class:`~jobqueue.registry.EnqueueOptions` of what its caller gave and
hands it to :func:`new_job`, which resolves it (an explicit option wins, then the registered
type's default, then the ``JOBQUEUE`` setting) and checks the rest.

It turns ``enqueue``'s and ``enqueue_many``'s arguments into jobs to insert, with no SQL
(:func:`new_job`, :func:`new_jobs`): everything is checked here, before the store is called, so
bad input writes nothing and leaves the caller's transaction usable.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption, InvalidPayload, UnknownJobType, UnregisteredJobType
from jobqueue.limits import concurrency
from jobqueue.payloads import to_json
from jobqueue.registry import (
    JOB_OPTIONS,
    PARENT_OPTIONS,
    EnqueueOptions,
    JobType,
    ResolvedOptions,
    registered,
    resolve,
    signature_of,
)
from jobqueue.settings.conf import get_settings
from jobqueue.store.interface import NewJob

__all__ = [
    "ENQUEUE_MANY_KEYS",
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
    job_type: str | JobType, options: EnqueueOptions, memo: dict[Any, Any], queue_given: bool
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
        arguments.queue_name(options.queue)
    found_key = ("type", job_type)
    if found_key not in memo:
        memo[found_key] = enqueue_type(job_type)
    found: JobType | None = memo[found_key]
    return type_name, found, options.resolve(found)


def new_job(
    job_type: str | JobType,
    payload: dict[str, Any] | None,
    options: EnqueueOptions,
    *,
    memo: dict[Any, Any] | None = None,
    queue_given: bool = True,
) -> NewJob:
    """Validate a job's type, payload and options; return the job to insert (writes nothing).

    The one place a job's options are checked and defaulted, whatever path made them.

    Args:
        job_type: a type name, or the object ``@job`` returned.
        payload: the handler's keyword arguments (None for ``{}``).
        options: the options as given (:class:`~jobqueue.registry.EnqueueOptions`).
        memo: a dict kept across the calls of one ``enqueue_many``; it remembers the answers
            that depend only on the job type, or on the type and the payload's keys.
        queue_given: False (an ``enqueue_many`` job without a ``queue`` key, a ``@job``
            function's own enqueue) takes the type's ``@job(queue=)`` for a queue of None;
            True refuses a queue of None, as any bad queue name.

    Returns:
        The job to insert.

    Raises:
        InvalidPayload, InvalidJobOption: as ``jobqueue.enqueue`` documents.
        UnregisteredJobType: the type is not registered here and the settings do not allow it
            (:func:`~jobqueue.options.enqueue_type`).
    """
    memo = {} if memo is None else memo
    # The checks and defaults that depend only on the type and the type-defaultable options
    # run once per distinct combination in a batch (a 10,000-job batch of one type: once).
    # The types are part of the key: True == 1 and 2.0 == 2, yet bools and floats are refused.
    defaultable = (options.queue, options.priority, options.max_attempts, options.timeout_s)
    static_key: Any = (job_type, queue_given, *map(type, defaultable), *defaultable)
    try:
        static = memo.get(static_key)
    except TypeError:  # an unhashable option: checked (and refused) below, never remembered
        static, static_key = None, None
    if static is None:
        static = _static(job_type, options, memo, queue_given)
        if static_key is not None:
            memo[static_key] = static
    type_name, found, resolved = static
    tenant_id = options.tenant_id
    arguments.text("tenant_id", tenant_id, 100)
    arguments.key("dedupe_key", options.dedupe_key)
    arguments.key("ordering_key", options.ordering_key)
    when, delay_s = arguments.run_at(options.run_at, options.delay)
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
        conf, found, type_name, payload, options.concurrency_key, options.concurrency_limit
    )
    return NewJob(
        queue=resolved.queue,
        type=type_name,
        payload_json=payload_json,
        priority=resolved.priority,
        tenant_id=tenant_id,
        run_at=when,
        delay_s=delay_s,
        max_attempts=resolved.max_attempts,
        timeout_s=resolved.timeout_s,
        dedupe_key=options.dedupe_key,
        ordering_key=options.ordering_key,
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
            options = EnqueueOptions.pick(spec)
            given = "queue" in spec
            built.append(
                new_job(
                    spec["job_type"], spec.get("payload"), options, memo=memo, queue_given=given
                )
            )
        except InvalidPayload as exc:
            raise InvalidPayload(f"{where}.{exc.path}", exc.problem) from None
        except UnregisteredJobType as exc:
            raise UnregisteredJobType(exc.job_type, f"{where}.{exc.option}") from None
        except InvalidJobOption as exc:
            raise InvalidJobOption(f"{where}.{exc.option}", exc.problem) from None
    return built
