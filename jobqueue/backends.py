"""The backend for Django's tasks framework (``django.tasks``, Django 6.0+).

Put it in ``TASKS`` and code written against Django's standard API runs on jobqueue's workers::

    TASKS = {
        "default": {
            "BACKEND": "jobqueue.backends.JobQueueBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"max_attempts": 5, "timeout_s": 60, "backoff": {"base_seconds": 2}},
        }
    }

A task is stored as a job whose type is the task's module path (``shop.tasks.send_receipt``) and
whose payload is ``{"args": [...], "kwargs": {...}, "backend": alias, "run_after": iso|None}``.
Workers find the task by importing that path, run it with Django's ``TaskContext``, and send
Django's ``task_started`` and ``task_finished`` signals. Retries, timeouts and dead letters are
jobqueue's: ``max_attempts``, ``timeout_s`` and ``backoff`` come from the task
(``@task(max_attempts=...)``), then ``OPTIONS``, then the ``JOBQUEUE`` setting.

This module imports ``django.tasks``; on Django 5.2, which has none, it cannot be imported.
"""

from __future__ import annotations

import builtins
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from traceback import format_exception
from typing import Any, cast

from django.conf import settings as django_settings
from django.tasks import DEFAULT_TASK_QUEUE_NAME, Task, TaskContext, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError, TaskResultStatus
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from . import client
from .arguments import validate_options
from .conf import Backoff, parse_backoff, validate_queue_name
from .errors import JobQueueConfigurationError, PermanentError
from .jobs import JobContext, JobType, register
from .states import JobState

__all__ = [
    "JobQueueBackend",
    "JobQueueTask",
    "parse_backend_params",
    "to_task_result",
    "to_task_result_status",
]

logger = logging.getLogger("jobqueue.backends")

#: Largest job id (``bigint``); a longer id string cannot name a job.
_MAX_JOB_ID = 2**63 - 1
_JOB_ID = re.compile(r"[1-9][0-9]{0,18}")

#: Error-history kinds that are failed attempts (one ``TaskError`` each).
_FAILED_ATTEMPT_KINDS = frozenset({"error", "lease_expired"})

_STATUS = {
    JobState.READY: TaskResultStatus.READY,
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.LEASED: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.DEAD: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
}


def to_task_result_status(state: str) -> TaskResultStatus:
    """Return Django's status for a job state: the one mapping between the two.

    ``ready`` and ``scheduled`` (waiting, or waiting to retry) are READY, ``leased`` is RUNNING,
    ``succeeded`` is SUCCESSFUL, ``dead`` and ``cancelled`` are FAILED.
    """
    return _STATUS[JobState(state)]


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
    """

    max_attempts: int | None = None
    timeout: float | timedelta | None = None
    dedupe_key: str | Callable[..., str | None] | None = None
    tenant: str | Callable[..., str] | None = None

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
        """Return a copy with changed defaults: Django's options plus jobqueue's."""
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


def _task_option(task: Task, name: str) -> Any:
    return getattr(task, name, None) if isinstance(task, JobQueueTask) else None


def _validate_extras(task: JobQueueTask) -> None:
    try:
        validate_options(max_attempts=task.max_attempts, timeout_s=task.timeout_s)
    except ValueError as exc:
        raise InvalidTask(str(exc)) from None
    if task.timeout_s is not None and not math.isfinite(task.timeout_s):
        raise InvalidTask(f"timeout must be a finite number of seconds, got {task.timeout!r}")
    for name in ("dedupe_key", "tenant"):
        value = getattr(task, name)
        if value is not None and not isinstance(value, str) and not callable(value):
            raise InvalidTask(f"{name} must be a string or a function of the task's arguments")


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


# -- the backend ---------------------------------------------------------------------------


class JobQueueBackend(BaseTaskBackend):
    """Run ``django.tasks`` tasks on jobqueue: durable, retried, dead-lettered.

    ``enqueue`` inserts the job in the caller's transaction on ``OPTIONS["database"]`` and
    returns a READY ``TaskResult`` whose ``id`` is the job id. Results can be read from any
    process (``get_result``), while the job waits, runs, and after it finished.
    """

    task_class = JobQueueTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # A bad entry must not stop Django from building the backend: `manage.py check` reports
        # it (jobqueue.E002), and enqueue and get_result raise it.
        self.config_error: InvalidTaskBackend | None = None
        try:
            self.config = parse_backend_params(alias, params)
        except InvalidTaskBackend as exc:
            self.config_error = exc
            self.config = BackendOptions()

    @property
    def using(self) -> str:
        """Return the alias of the queue's database."""
        return self.config.database

    def _raise_config_error(self) -> None:
        if self.config_error is not None:
            raise self.config_error

    def validate_task(self, task: Task) -> None:
        """Check ``task`` as Django's backends do, plus jobqueue's rules; register it.

        Raises:
            InvalidTask: not a module-level function, ``takes_context`` without a ``context``
                first parameter, a priority outside -100..100, a naive ``run_after`` under
                ``USE_TZ``, a queue not in ``QUEUES`` or not a valid queue name, or a bad
                ``max_attempts``/``timeout``/``dedupe_key``/``tenant``.
        """
        super().validate_task(task)
        try:
            validate_queue_name(task.queue_name)
        except ValueError as exc:
            raise InvalidTask(str(exc)) from None
        if isinstance(task, JobQueueTask):
            _validate_extras(task)
        # Workers resolve job types through the registry: register the task under its module
        # path (once), so the reaper and the executor retry it with this backend's backoff.
        register(
            JobType(
                _run_task,
                name=task.module_path,
                queue=task.queue_name,
                priority=task.priority,
                max_attempts=None,
                timeout_s=None,
                backoff=self.config.backoff,
                takes_context=True,
            )
        )

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert a job for ``task`` in the caller's transaction and return its READY result.

        When the task's ``dedupe_key`` is held by a live job, nothing is written and that job's
        current result is returned (and ``task_enqueued`` is not sent).

        Raises:
            InvalidTask: see :meth:`validate_task`.
            InvalidTaskBackend: the ``TASKS`` entry is invalid.
            jobqueue.errors.InvalidPayload: an argument is not JSON (the message names it).
            jobqueue.errors.QueueUnavailable: the queue's database cannot be reached.
        """
        self._raise_config_error()
        self.validate_task(task)
        args, kwargs = list(args), dict(kwargs)
        payload = {
            "args": args,
            "kwargs": kwargs,
            "backend": self.alias,
            "run_after": task.run_after.isoformat() if task.run_after else None,
        }
        timeout_s = _task_option(task, "timeout_s") or self.config.timeout_s
        job_id, created = client.enqueue_or_get(
            task.queue_name,
            task.module_path,
            payload,
            run_at=task.run_after,
            priority=task.priority,
            dedupe_key=_call_option(task, "dedupe_key", args, kwargs),
            max_attempts=_task_option(task, "max_attempts") or self.config.max_attempts,
            timeout_s=timeout_s,
            tenant_id=_call_option(task, "tenant", args, kwargs) or "",
            using=self.using,
        )
        if not created:
            return self.get_result(str(job_id))
        result: TaskResult = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """Return the current result of the task whose job id is ``result_id``.

        Raises:
            TaskResultDoesNotExist: no job has that id, the id is malformed, or the job is not a
                ``django.tasks`` task (a native job, or a task that can no longer be imported).
            InvalidTaskBackend: the ``TASKS`` entry is invalid.
        """
        self._raise_config_error()
        from .models import Job

        text = str(result_id) if isinstance(result_id, int) else result_id
        if not isinstance(text, str) or not _JOB_ID.fullmatch(text) or int(text) > _MAX_JOB_ID:
            raise TaskResultDoesNotExist(result_id)
        try:
            job = Job.objects.using(self.using).get(id=int(text))
        except Job.DoesNotExist:
            raise TaskResultDoesNotExist(result_id) from None
        return to_task_result(job, self)

    def check(self, **kwargs: Any) -> list[Any]:
        """Return no messages: ``jobqueue.checks`` reports this entry (jobqueue.E002)."""
        return []


def _call_option(task: Task, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    value = _task_option(task, name)
    return value(*args, **kwargs) if callable(value) else value


# -- jobs as task results ------------------------------------------------------------------


def _task_for(job: Any, backend: JobQueueBackend) -> Task:
    """Return the task a job runs, as enqueued (priority, queue, backend, run_after)."""
    try:
        base = import_string(job.type)
    except ImportError:
        raise TaskResultDoesNotExist(f"{job.id}: task {job.type!r} cannot be imported") from None
    payload = job.payload if isinstance(job.payload, dict) else {}
    if not isinstance(base, Task) or not {"args", "kwargs"} <= set(payload):
        raise TaskResultDoesNotExist(f"{job.id}: job type {job.type!r} is not a django.tasks task")
    run_after = payload.get("run_after")
    try:
        return replace(
            base,
            priority=job.priority,
            queue_name=job.queue,
            backend=payload.get("backend") or backend.alias,
            run_after=datetime.fromisoformat(run_after) if run_after else None,
        )
    except (InvalidTask, InvalidTaskBackend, ValueError):
        # The settings changed since the job was enqueued (a queue or alias gone): describe
        # the job with the task as declared rather than not at all.
        return base


def _exception_class_path(entry: dict[str, Any]) -> str:
    path = entry.get("exception_class_path")
    if path:
        return path
    if entry.get("kind") == "lease_expired":
        return "jobqueue.errors.LeaseLost"
    name = entry.get("type") or "Exception"
    if isinstance(getattr(builtins, name, None), type):
        return f"builtins.{name}"
    return name


def _errors(job: Any) -> list[TaskError]:
    return [
        TaskError(
            exception_class_path=_exception_class_path(entry),
            traceback=entry.get("traceback") or entry.get("message", ""),
        )
        for entry in job.errors or []
        if entry.get("kind", "error") in _FAILED_ATTEMPT_KINDS
    ]


def _worker_ids(job: Any, attempts: int, current_worker: str | None = None) -> list[str]:
    """Return one worker id per attempt (so ``TaskResult.attempts`` is the attempt count)."""
    by_attempt: dict[int, str] = {}
    for entry in job.errors or []:
        if entry.get("kind") == "operator_retry":
            by_attempt.clear()  # attempts count again from 1 after an operator retry
        elif entry.get("kind", "error") in _FAILED_ATTEMPT_KINDS and entry.get("worker"):
            by_attempt[entry.get("attempt", 0)] = entry["worker"]
    last = current_worker or job.leased_by
    return [by_attempt.get(n, last) for n in range(1, attempts)] + ([last] if attempts else [])


def to_task_result(job: Any, backend: JobQueueBackend) -> TaskResult:
    """Describe a job of a ``django.tasks`` task as Django's ``TaskResult``.

    ``errors`` has one ``TaskError`` per failed attempt (an expired lease counts, as
    ``jobqueue.errors.LeaseLost``); ``worker_ids`` one worker per attempt since the last operator
    retry; ``started_at`` and ``last_attempted_at`` are both the start of the latest attempt.

    Raises:
        TaskResultDoesNotExist: the job is not a task (see :meth:`JobQueueBackend.get_result`).
    """
    task = _task_for(job, backend)
    result: TaskResult = TaskResult(
        task=task,
        id=str(job.id),
        status=to_task_result_status(job.state),
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=job.payload["args"],
        kwargs=job.payload["kwargs"],
        backend=task.backend,
        errors=_errors(job),
        worker_ids=_worker_ids(job, job.attempts),
    )
    if job.state == JobState.SUCCEEDED:
        object.__setattr__(result, "_return_value", job.result)
    return result


# -- running a task in a worker ------------------------------------------------------------


def _queue_backend(alias: str) -> JobQueueBackend:
    from django.tasks import task_backends

    backend = task_backends[alias]
    if not isinstance(backend, JobQueueBackend):
        raise InvalidTaskBackend(
            f"TASKS[{alias!r}] is not a JobQueueBackend in this process, but it enqueued the task"
        )
    return backend


def _send(signal: Any, sender: type, task_result: TaskResult) -> None:
    for receiver, response in signal.send_robust(sender, task_result=task_result):
        if isinstance(response, Exception):
            logger.error(
                "task %s: receiver %r of %s failed",
                task_result.id,
                receiver,
                "task_started" if signal is task_started else "task_finished",
                exc_info=response,
            )


def _run_task(context: JobContext, **payload: Any) -> Any:
    """Internal: the handler of every task's job type; the executor calls it with the payload.

    Loads the job's result, sends ``task_started``, calls the task (an async one runs to
    completion on its own event loop) with a ``TaskContext`` if it takes one, and sends
    ``task_finished``: inside the exception handler on failure, so Django's logging records the
    traceback. Exceptions propagate, and the executor decides retry or dead as for any job.
    """
    from .models import Job

    backend = _queue_backend(payload.get("backend") or "default")
    job = Job.objects.using(backend.using).get(id=context.job_id)
    result = to_task_result(job, backend)
    object.__setattr__(result, "status", TaskResultStatus.RUNNING)
    object.__setattr__(result, "finished_at", None)
    object.__setattr__(result, "worker_ids", _worker_ids(job, context.attempt, context.worker_id))
    sender = type(backend)
    _send(task_started, sender, result)
    task = result.task
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
        else:
            value = task.call(*result.args, **result.kwargs)
    except BaseException as exc:
        # The executor's rule: a permanent error or the last attempt is dead, else it retries.
        final = isinstance(exc, PermanentError) or context.attempt >= context.max_attempts
        path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        result.errors.append(
            TaskError(exception_class_path=path, traceback="".join(format_exception(exc)))
        )
        object.__setattr__(
            result, "status", TaskResultStatus.FAILED if final else TaskResultStatus.READY
        )
        object.__setattr__(result, "finished_at", timezone.now() if final else None)
        if not context.should_stop:
            _send(task_finished, sender, result)
        raise
    if context.should_stop:
        # Timed out, lease lost or cancel requested: the worker records another outcome.
        return value
    try:
        object.__setattr__(result, "_return_value", normalize_json(value))
    except (TypeError, ValueError):
        pass  # the executor stores no result and logs why; the task still succeeded
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    _send(task_finished, sender, result)
    return value


def task_job_type(type_name: str) -> JobType:
    """Internal: return the job type of the ``django.tasks`` task at ``type_name``.

    For a task declared for another backend and enqueued here with ``.using(backend=...)``:
    its module's import registered nothing, so the executor asks here.

    Raises:
        UnknownJobType: nothing importable at that path is a task.
    """
    from .errors import UnknownJobType

    try:
        found = import_string(type_name)
    except ImportError:
        raise UnknownJobType(type_name) from None
    if not isinstance(found, Task):
        raise UnknownJobType(type_name)
    return register(
        JobType(
            _run_task,
            name=type_name,
            queue=found.queue_name,
            priority=found.priority,
            max_attempts=None,
            timeout_s=None,
            backoff=None,
            takes_context=True,
        )
    )
