"""Internal: turn ``enqueue``'s and ``enqueue_many``'s arguments into jobs to insert (no SQL).

Everything is checked here, before the store is called, so bad input writes nothing and leaves
the caller's transaction usable. Type defaults are applied in one place,
:class:`~jobqueue.options.EnqueueOptions`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption, InvalidPayload, UnregisteredJobType
from jobqueue.flows.dependencies import PARENT_KEYS
from jobqueue.jobtypes import JobType, signature_of
from jobqueue.limits import concurrency
from jobqueue.options import EnqueueOptions, ResolvedOptions, enqueue_type
from jobqueue.payloads import to_json
from jobqueue.settings.conf import get_settings
from jobqueue.store.interface import NewJob

__all__ = ["ENQUEUE_MANY_KEYS", "new_job", "new_jobs"]

#: The keys one job of ``enqueue_many`` may have: ``enqueue``'s arguments but ``using``.
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
    "concurrency_key",
    "concurrency_limit",
)

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
        return f"does not fit {job_type.name}{signature}: {exc}"
    return None


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
            known = ", ".join((*ENQUEUE_MANY_KEYS, *PARENT_KEYS))
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
