"""Internal: the options of ``django.tasks`` tasks on jobqueue, and of a ``TASKS`` entry.

``JobQueueTask`` carries jobqueue's per-task options (``@task(max_attempts=..., timeout=...,
dedupe_key=..., tenant=...)``); ``parse_backend_params`` validates the ``QUEUES`` and ``OPTIONS``
of a ``TASKS`` entry. Both raise Django's own errors (``InvalidTask``, ``InvalidTaskBackend``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings as django_settings
from django.tasks import DEFAULT_TASK_QUEUE_NAME, Task
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
from django.utils.module_loading import import_string

from jobqueue.arguments import validate_options
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.registry import EnqueueOptions
from jobqueue.retries import Backoff
from jobqueue.settings.concurrency import MAX_CONCURRENCY_LIMIT
from jobqueue.settings.policies import parse_backoff
from jobqueue.settings.rates import parse_rate
from jobqueue.validation import is_count, validate_queue_name

__all__ = [
    "BackendOptions",
    "JobQueueTask",
    "call_option",
    "extras_from_payload",
    "extras_to_payload",
    "job_options",
    "parse_backend_params",
    "task_option",
    "validate_extras",
]


def _function_path(function: Callable[..., Any]) -> str | None:
    """Return the import path of a module-level function; None for a lambda or a closure."""
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    name = getattr(function, "__qualname__", "")
    if module is None or "." in name or getattr(module, name, None) is not function:
        return None
    return f"{module.__name__}.{name}"


# -- the task class ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueTask(Task):
    """Django's ``Task`` plus jobqueue's per-task options (the backend's ``task_class``).

    On Django 6.1 ``@task`` passes extra keyword arguments to the backend's task class::

        @task(max_attempts=3, timeout=120, dedupe_key=lambda order_id: f"receipt:{order_id}")
        def send_receipt(order_id): ...

    Attributes:
        max_attempts: attempts before the job is dead-lettered (>= 1); None: the backend's
            ``OPTIONS["max_attempts"]``, else ``JOBQUEUE["MAX_ATTEMPTS"]``.
        timeout: hard limit on one run, seconds or a ``timedelta``; None: ``OPTIONS["timeout_s"]``,
            else ``JOBQUEUE["TIMEOUT_SECONDS"]``.
        dedupe_key: a string, or a function called with the task's arguments that returns one
            (or None). While a job of the queue holds the key, enqueue returns its result.
        tenant: the tenant id, a string or a function of the task's arguments.
        concurrency_key: at most ``concurrency_limit`` jobs of this key run at once, across
            all workers: a string, or a function of the task's arguments returning one (or
            None: not limited). Declared on ``@task`` (``.using()`` does not change it).
        concurrency_limit: most running jobs of the key (1..1,000,000); None: the key's
            ``JOBQUEUE["CONCURRENCY_LIMITS"]`` entry.
        rate_limit: at most this many of the task's jobs start, across all workers, as
            ``@job(rate_limit=)`` takes it (``"10/s"``, ``"600/min"``, ``{"rate": "10/s",
            "burst": 20}``; docs/rate-limits.md); ``JOBQUEUE["RATE_LIMITS"]
            ["type"]`` (keyed by the task's import path) overrides it. Declared on ``@task``.
    """

    max_attempts: int | None = None
    timeout: float | timedelta | None = None
    dedupe_key: str | Callable[..., str | None] | None = None
    tenant: str | Callable[..., str] | None = None
    concurrency_key: str | Callable[..., str | None] | None = None
    concurrency_limit: int | None = None
    rate_limit: str | float | dict[str, Any] | None = None

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | None = None,
        backend: str | None = None,
        max_attempts: int | None = None,
        timeout: float | timedelta | None = None,
        dedupe_key: str | Callable[..., str | None] | None = None,
        tenant: str | Callable[..., str] | None = None,
    ) -> JobQueueTask:
        """Return a copy with changed defaults: Django's options plus jobqueue's.

        Raises:
            InvalidTask: a ``dedupe_key`` or ``tenant`` function that is not a module-level
                function (a lambda, a closure): the job keeps the task's options by import path
                (so that ``get_result`` gives back this task), and such a function has none.
                Declare it on ``@task``, or pass the string it would return.
        """
        for name, value in (("dedupe_key", dedupe_key), ("tenant", tenant)):
            if callable(value) and _function_path(value) is None:
                raise InvalidTask(
                    f".using({name}=...) takes a string or a module-level function, got "
                    f"{getattr(value, '__qualname__', value)!r}: its job keeps the function by "
                    "import path; declare a lambda on @task, or pass the string it returns"
                )
        # Task.using returns replace(self, ...): a JobQueueTask here (django-stubs says Task).
        task = cast(
            JobQueueTask,
            Task.using(
                self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend
            ),
        )
        extra = {
            "max_attempts": max_attempts,
            "timeout": timeout,
            "dedupe_key": dedupe_key,
            "tenant": tenant,
        }
        changes: dict[str, Any] = {
            name: value for name, value in extra.items() if value is not None
        }
        return replace(task, **changes) if changes else task

    @property
    def timeout_s(self) -> float | None:
        """Return ``timeout`` in seconds (None when unset)."""
        if isinstance(self.timeout, timedelta):
            return self.timeout.total_seconds()
        return self.timeout


def task_option(task: Task, name: str) -> Any:
    """Internal: return jobqueue's option ``name`` of ``task``; None for a plain ``Task``."""
    return getattr(task, name, None) if isinstance(task, JobQueueTask) else None


def call_option(task: Task, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Internal: return option ``name`` of ``task``, called with the task's arguments if callable.

    Args:
        task: the task being enqueued.
        name: ``"dedupe_key"``, ``"tenant"`` or ``"concurrency_key"``.
        args: its positional arguments.
        kwargs: its keyword arguments.

    Returns:
        The option's value (what the function returned), or None when unset.
    """
    value = task_option(task, name)
    return value(*args, **kwargs) if callable(value) else value


def job_options(
    task: Task, defaults: BackendOptions, args: list[Any], kwargs: dict[str, Any]
) -> EnqueueOptions:
    """Internal: the options of the job that runs ``task`` with these arguments.

    Django's options (queue, ``run_after``, priority) and jobqueue's (a task's own, then the
    ``TASKS`` entry's ``OPTIONS``), as the one options object every enqueue passes; the type
    defaults and the settings fill the rest at enqueue, as for any job.

    Args:
        task: the task being enqueued.
        defaults: its backend's ``OPTIONS``.
        args: its positional arguments (a ``dedupe_key``/``tenant``/``concurrency_key``
            function is called with them).
        kwargs: its keyword arguments.

    Returns:
        The job's options.
    """
    return EnqueueOptions(
        queue=task.queue_name,
        run_at=task.run_after,
        priority=task.priority,
        dedupe_key=call_option(task, "dedupe_key", args, kwargs),
        max_attempts=task_option(task, "max_attempts") or defaults.max_attempts,
        timeout_s=task_option(task, "timeout_s") or defaults.timeout_s,
        tenant_id=call_option(task, "tenant", args, kwargs) or "",
        concurrency_key=call_option(task, "concurrency_key", args, kwargs),
        concurrency_limit=task_option(task, "concurrency_limit"),
    )


def validate_extras(task: JobQueueTask) -> None:
    """Internal: check jobqueue's options of ``task``.

    Raises:
        InvalidTask: ``max_attempts`` or ``timeout`` refused by
            ``jobqueue.arguments.validate_options``, a ``timeout`` that is not finite, a
            ``dedupe_key``/``tenant``/``concurrency_key`` that is neither a string nor a
            function, a ``concurrency_limit`` out of range, or a ``rate_limit`` that is not a
            rate (the message says which part).
    """
    try:
        validate_options(max_attempts=task.max_attempts, timeout_s=task.timeout_s)
    except ValueError as exc:
        raise InvalidTask(str(exc)) from None
    if task.timeout_s is not None and not math.isfinite(task.timeout_s):
        raise InvalidTask(f"timeout must be a finite number of seconds, got {task.timeout!r}")
    for name in ("dedupe_key", "tenant", "concurrency_key"):
        value = getattr(task, name)
        if value is not None and not isinstance(value, str) and not callable(value):
            raise InvalidTask(f"{name} must be a string or a function of the task's arguments")
    limit = task.concurrency_limit
    if limit is not None and not is_count(limit, 1, MAX_CONCURRENCY_LIMIT):
        raise InvalidTask(
            f"concurrency_limit must be an integer in 1..{MAX_CONCURRENCY_LIMIT:,}, got {limit!r}"
        )
    if task.rate_limit is not None:
        try:
            parse_rate(task.rate_limit, f"task {task.module_path} rate_limit")
        except JobQueueConfigurationError as exc:
            raise InvalidTask(str(exc)) from None


def extras_to_payload(task: Task) -> dict[str, Any]:
    """Internal: jobqueue's options set on ``task``, as JSON for its job's payload.

    So that ``get_result`` reads back the task as it was enqueued (``.using(max_attempts=3)``
    included), not as declared: the job row holds only the effective values (a default filled
    in), which are not the task's own. A ``timeout`` keeps its type (seconds or a ``timedelta``);
    a ``dedupe_key``/``tenant`` function is stored by its import path when it has one (a lambda
    has none: ``get_result`` then shows the declared task's).

    Returns:
        ``{option: value}`` for each option set (empty for a plain ``Task``).
    """
    if not isinstance(task, JobQueueTask):
        return {}
    stored: dict[str, Any] = {}
    if task.max_attempts is not None:
        stored["max_attempts"] = task.max_attempts
    if isinstance(task.timeout, timedelta):
        stored["timeout"] = {"timedelta_seconds": task.timeout.total_seconds()}
    elif task.timeout is not None:
        stored["timeout"] = task.timeout
    for name in ("dedupe_key", "tenant"):
        value = getattr(task, name)
        if isinstance(value, str):
            stored[name] = value
        elif value is not None and (path := _function_path(value)) is not None:
            stored[name] = {"function": path}
    return stored


def extras_from_payload(stored: Any) -> dict[str, Any]:
    """Internal: the task options :func:`extras_to_payload` stored, as ``JobQueueTask`` fields.

    Anything unreadable (a function renamed since) is left out: the declared value stands.
    """
    if not isinstance(stored, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(stored.get("max_attempts"), int):
        found["max_attempts"] = stored["max_attempts"]
    timeout = stored.get("timeout")
    if isinstance(timeout, dict) and isinstance(timeout.get("timedelta_seconds"), int | float):
        found["timeout"] = timedelta(seconds=timeout["timedelta_seconds"])
    elif isinstance(timeout, int | float):
        found["timeout"] = timeout
    for name in ("dedupe_key", "tenant"):
        value = stored.get(name)
        if isinstance(value, str):
            found[name] = value
        elif isinstance(value, dict) and isinstance(value.get("function"), str):
            try:
                function = import_string(value["function"])
            except ImportError:
                continue
            if callable(function):
                found[name] = function
    return found


# -- configuration -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendOptions:
    """The validated ``OPTIONS`` of a ``TASKS`` entry.

    Attributes:
        database: alias of the queue's database (default ``"default"``).
        max_attempts: default ``max_attempts`` of its tasks; None: ``JOBQUEUE["MAX_ATTEMPTS"]``.
        timeout_s: default hard limit on one run, seconds; None: ``JOBQUEUE["TIMEOUT_SECONDS"]``.
        backoff: retry backoff of its tasks; None: ``JOBQUEUE["BACKOFF"]``.
    """

    database: str = "default"
    max_attempts: int | None = None
    timeout_s: float | None = None
    backoff: Backoff | None = None


_OPTION_KEYS = ("database", "max_attempts", "timeout_s", "backoff")


def parse_backend_params(alias: str, params: dict[str, Any]) -> BackendOptions:
    """Validate the ``QUEUES`` and ``OPTIONS`` of the ``TASKS[alias]`` entry.

    Args:
        alias: the entry's key in ``TASKS``.
        params: the entry (``BACKEND``, ``QUEUES``, ``OPTIONS``).

    Returns:
        The entry's options, with defaults for what it leaves out.

    Raises:
        InvalidTaskBackend: naming the alias and the bad key or value.
    """
    where = f"TASKS[{alias!r}]"
    queues = params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME])
    if isinstance(queues, str) or not isinstance(queues, list | tuple | set | frozenset):
        raise InvalidTaskBackend(f"{where}['QUEUES'] must be a list of queue names, got {queues!r}")
    for name in queues:
        try:
            validate_queue_name(name)
        except ValueError as exc:
            raise InvalidTaskBackend(f"{where}['QUEUES']: {exc}") from None
    options = params.get("OPTIONS", {})
    if not isinstance(options, dict):
        raise InvalidTaskBackend(f"{where}['OPTIONS'] must be a dict, got {options!r}")
    unknown = sorted(set(options) - set(_OPTION_KEYS))
    if unknown:
        raise InvalidTaskBackend(
            f"{where}['OPTIONS'] has unknown keys: {', '.join(map(str, unknown))} "
            f"(known: {', '.join(_OPTION_KEYS)})"
        )
    database = options.get("database", "default")
    if database not in django_settings.DATABASES:
        raise InvalidTaskBackend(
            f"{where}['OPTIONS']['database'] is {database!r}, which is not in DATABASES"
        )
    try:
        validate_options(
            max_attempts=options.get("max_attempts"), timeout_s=options.get("timeout_s")
        )
        backoff = options.get("backoff")
        parsed_backoff = (
            parse_backoff(backoff, f"{where}['OPTIONS']['backoff']") if backoff else None
        )
    except (ValueError, JobQueueConfigurationError) as exc:
        raise InvalidTaskBackend(f"{where}['OPTIONS']: {exc}") from None
    timeout = options.get("timeout_s")
    return BackendOptions(
        database=database,
        max_attempts=options.get("max_attempts"),
        timeout_s=None if timeout is None else float(timeout),
        backoff=parsed_backoff,
    )
