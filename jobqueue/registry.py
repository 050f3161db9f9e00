"""Job types and their registry (type name -> handler); ``@job`` is in :mod:`jobqueue.client`.

Workers resolve a job's ``type`` through this registry. Handlers register when their module is
imported: the app config imports ``jobs`` modules of installed apps at startup, and
:func:`resolve` imports a dotted type name's module on demand, so a handler defined anywhere is
found as long as its name is its dotted path.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, fields
from typing import Any, TypeVar

from jobqueue.arguments import queue_name, validate_options
from jobqueue.errors import InvalidJobOption, JobQueueConfigurationError, UnknownJobType
from jobqueue.retries import Backoff
from jobqueue.settings.concurrency import check_declared
from jobqueue.settings.conf import get_settings
from jobqueue.settings.policies import parse_backoff
from jobqueue.settings.rates import Limiter, parse_rate
from jobqueue.validation import validate_dependency_name

__all__ = [
    "ENQUEUE_OPTIONS",
    "JOB_OPTIONS",
    "PARENT_OPTIONS",
    "EnqueueOptions",
    "JobType",
    "ResolvedOptions",
    "add_resolver",
    "declare",
    "register",
    "registered",
    "registry",
    "resolve",
    "resolve_handler",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedOptions:
    """The type-defaultable options a job is written with: every one filled in and valid."""

    queue: str
    priority: int
    max_attempts: int
    timeout_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """The options of one job as its caller gave them; None means "not given".

    The one options object every entry point passes (``enqueue``, ``enqueue_many``'s jobs,
    ``JobFunction.enqueue``, chain steps, batch members and callbacks, cron fires, the
    ``django.tasks`` backend): its fields are the option names (:data:`JOB_OPTIONS`), and
    :meth:`resolve` is where they meet the type's ``@job`` defaults and the settings.
    ``jobqueue.options.new_job`` checks the rest and builds the row. Here, below the client,
    so that the ``django.tasks`` backend's modules can build it without importing the models.

    Attributes:
        queue: queue name; None: the type's ``@job(queue=)``.
        run_at: aware datetime from which the job may run.
        delay: seconds (or a timedelta) from now; exclusive with ``run_at``.
        priority: -100..100, higher runs sooner; None: the type's, else 0.
        dedupe_key: the key a live job holds (None for none).
        max_attempts: claims before dead-lettering (>= 1); None: the type's, else the setting.
        timeout_s: hard limit on one run, seconds; None: the type's, else the setting.
        tenant_id: the tenant the job belongs to ("" for none).
        ordering_key: jobs of one key run one at a time, in order (None for none).
        concurrency_key: at most ``concurrency_limit`` jobs of the key run at once.
        concurrency_limit: 1..1,000,000; None: the setting's for the key, else the type's.
    """

    queue: Any = None
    run_at: Any = None
    delay: Any = None
    priority: Any = None
    dedupe_key: Any = None
    max_attempts: Any = None
    timeout_s: Any = None
    tenant_id: Any = ""
    ordering_key: Any = None
    concurrency_key: Any = None
    concurrency_limit: Any = None

    @classmethod
    def pick(cls, given: Mapping[str, Any]) -> EnqueueOptions:
        """Return the options among ``given``'s keys (the others are left out)."""
        return cls(**{name: given[name] for name in JOB_OPTIONS if name in given})

    def resolve(self, job_type: JobType | None) -> ResolvedOptions:
        """Fill what was not given from ``job_type``'s defaults, then the settings; validate.

        Args:
            job_type: the registered type (see ``jobqueue.options.job_type_of``), or None for
                a type not known in this process.

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


#: The options of one job, in the order ``enqueue`` takes them: the fields of
#: :class:`EnqueueOptions`, from which every entry point derives its option names.
JOB_OPTIONS = tuple(option.name for option in fields(EnqueueOptions))
#: The options that make a job wait for parent jobs (``jobqueue.flows.dependencies``).
PARENT_OPTIONS = ("after", "run_on_parent_failure", "takes_parent_results")
#: Keyword arguments of ``JobFunction.enqueue`` (``jobqueue.client``) that are options, not payload.
ENQUEUE_OPTIONS = frozenset({*JOB_OPTIONS, "using", *PARENT_OPTIONS})


@dataclass(eq=False, repr=False)
class JobType:
    """A registered job type: a handler plus its per-type defaults.

    Calling the object calls the handler directly (synchronously, no queue). What ``@job``
    returns is a :class:`jobqueue.client.JobFunction`, which can also enqueue itself. Compared
    and hashed by identity: a type registered again is another type.
    """

    func: Callable[..., Any]
    _: KW_ONLY
    name: str
    queue: str
    priority: int
    max_attempts: int | None
    timeout_s: float | None
    backoff: Backoff | None
    takes_context: bool
    dependency: str | None = None
    rate_limit: Limiter | None = None
    concurrency_key: str | Callable[..., str | None] | None = None
    concurrency_limit: int | None = None

    def __post_init__(self) -> None:
        functools.update_wrapper(self, self.func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the handler directly, in this thread: no queue, no retries."""
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<JobType {self.name} queue={self.queue}>"


T = TypeVar("T", bound="JobType")

_registry: dict[str, JobType] = {}
_lock = threading.Lock()
#: Asked in order for a type name nothing registers (:func:`add_resolver`).
_resolvers: list[Callable[[str], JobType]] = []


def registered(type_name: str) -> JobType | None:
    """Return the job type registered as ``type_name`` in this process, or None (no import)."""
    return _registry.get(type_name)


def policy_for(job_type: str) -> Backoff:
    """Return the backoff policy of ``job_type``.

    The type's ``@job(backoff=...)`` (or its tasks backend's ``backoff`` option) when it is
    registered in this process, else ``JOBQUEUE["BACKOFF"]``.

    Args:
        job_type: the job type name.

    Returns:
        The :class:`~jobqueue.retries.Backoff` to pass to ``jobqueue.retries.decide``.
    """
    found = registered(job_type)
    return (found.backoff if found else None) or get_settings().backoff


@functools.cache
def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """Return ``func``'s signature, computed once (None when Python cannot tell it)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def add_resolver(resolver: Callable[[str], JobType]) -> None:
    """Internal: let ``resolver`` find the handler of a type name that nothing registers.

    The app config adds the ``django.tasks`` backend's (a task's import path resolves to the
    job type that runs it), so the registry, below the backend, needs nothing of it. Added
    once per resolver, however often the app config gets ready.

    Args:
        resolver: called with the type name; returns its job type, or raises
            ``UnknownJobType``.
    """
    with _lock:
        if resolver not in _resolvers:
            _resolvers.append(resolver)


def resolve_handler(type_name: str) -> JobType:
    """Internal: return the handler a worker runs for ``type_name``.

    A registered type (:func:`resolve`, which imports its module), else what an added resolver
    finds (:func:`add_resolver`: a ``django.tasks`` task).

    Raises:
        UnknownJobType: neither; with a resolver's reason when one gave it.
        ImportError: the handler's module exists but fails to import (as :func:`resolve`).
    """
    try:
        return resolve(type_name)
    except UnknownJobType as not_registered:
        # With no resolver added (Django before 6.0 has no django.tasks), or none that knows
        # the name, the registry's own error stands; a resolver's reason, when it gave one.
        unknown = not_registered
        for resolver in list(_resolvers):
            try:
                return resolver(type_name)
            except UnknownJobType as reason:
                unknown = reason
        raise unknown from unknown.__cause__


def registry() -> dict[str, JobType]:
    """Return a copy of the registered job types, by name."""
    return dict(_registry)


# A TypeVar, not PEP 695 syntax: jobqueue supports Python 3.10.
def declare(
    f: Callable[..., Any],
    cls: type[T],
    *,
    name: str | None,
    queue: str,
    priority: int,
    max_attempts: int | None,
    timeout_s: float | None,
    backoff: dict[str, Any] | None,
    takes_context: bool,
    dependency: str | None,
    rate_limit: Any = None,
    concurrency_key: str | Callable[..., str | None] | None = None,
    concurrency_limit: int | None = None,
) -> T:
    """Internal: validate ``@job``'s options, build a ``cls`` for ``f`` and register it.

    :func:`jobqueue.job` documents the options; this is its body, kept below the client so the
    registry needs nothing that enqueues.

    Raises:
        ImproperlyConfigured: a bad default, a handler parameter that collides with an enqueue
            option name, or a second registration of the same name by another function.
    """
    type_name = name or f"{f.__module__}.{f.__qualname__}"
    where = f"@job for {type_name}"
    try:
        validate_options(
            queue=queue, priority=priority, max_attempts=max_attempts, timeout_s=timeout_s
        )
    except ValueError as exc:
        raise JobQueueConfigurationError(f"{where}: {exc}") from None
    if dependency is not None:
        try:
            validate_dependency_name(dependency)
        except ValueError as exc:
            raise JobQueueConfigurationError(f"{where}: {exc}") from None
    limit = None if rate_limit is None else parse_rate(rate_limit, f"{where} rate_limit")
    check_declared(where, concurrency_key, concurrency_limit)
    parsed_backoff = parse_backoff(backoff, where=f"{where} backoff") if backoff else None
    params = list(inspect.signature(f).parameters)
    if takes_context:
        params = params[1:]
    clash = sorted(set(params) & ENQUEUE_OPTIONS)
    if clash:
        raise JobQueueConfigurationError(
            f"{where}: handler parameters {', '.join(clash)} collide with enqueue options; "
            "rename them"
        )
    job_type = cls(
        f,
        name=type_name,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        backoff=parsed_backoff,
        takes_context=takes_context,
        dependency=dependency,
        rate_limit=limit,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
    )
    with _lock:
        existing = _registry.get(type_name)
        if existing is not None and _qualified(existing.func) != _qualified(f):
            raise JobQueueConfigurationError(
                f"job type {type_name!r} is already registered by {_qualified(existing.func)}"
            )
        _registry[type_name] = job_type
    return job_type


def register(job_type: JobType) -> JobType:
    """Internal: add ``job_type`` to the registry unless its name is taken; return the holder.

    The ``django.tasks`` backend registers each task it validates this way, so workers resolve
    and back off tasks like ``@job`` types; a ``@job`` of the same name keeps the name.
    """
    with _lock:
        return _registry.setdefault(job_type.name, job_type)


def _qualified(f: Callable[..., Any]) -> str:
    return f"{f.__module__}.{f.__qualname__}"


def resolve(type_name: str) -> JobType:
    """Return the handler registered as ``type_name``, importing its module if needed.

    Raises:
        UnknownJobType: nothing registers that name (a skewed deploy, or a typo).
        ImportError: the handler's module exists but fails to import; that is a bug in it, and
            the job records this error instead of a misleading "unknown type".
    """
    found = _registry.get(type_name)
    if found is not None:
        return found
    module_name = type_name.rpartition(".")[0]
    while module_name:
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only a missing module on the path we are walking means "try the parent"
            # (e.g. "app.jobs.Class.method"); a module that imports something missing is broken.
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            module_name = module_name.rpartition(".")[0]
            continue
        break
    found = _registry.get(type_name)
    if found is None:
        raise UnknownJobType(type_name)
    return found
