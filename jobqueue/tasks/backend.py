"""Internal: ``JobQueueBackend``, the ``django.tasks`` backend (public as ``jobqueue.backends``).

It validates and registers tasks, enqueues them as jobs in the caller's transaction, and reads
their results back; a task's job type is handled by :func:`_run_task`, which hands the run to
``jobqueue.tasks.runner``.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core import checks
from django.tasks import Task, TaskResult, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskResultStatus
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
from django.tasks.signals import task_enqueued
from django.utils.module_loading import import_string

from jobqueue.errors import UnknownJobType
from jobqueue.payloads import normalize
from jobqueue.registry import JobType, register
from jobqueue.retries import Backoff
from jobqueue.settings.rates import Limiter, parse_rate
from jobqueue.tasks.options import (
    BackendOptions,
    JobQueueTask,
    extras_to_payload,
    job_options,
    parse_backend_params,
    task_option,
    validate_extras,
)
from jobqueue.validation import validate_queue_name
from jobqueue.worker.context import JobContext

__all__ = ["JobQueueBackend", "task_job_type"]


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
            validate_extras(task)
        # Workers resolve job types through the registry: register the task under its module
        # path (once), so the reaper and the executor retry it with this backend's backoff.
        _register_task(task.module_path, task, self.config.backoff)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert a job for ``task`` in the caller's transaction and return its READY result.

        When the task's ``dedupe_key`` is held by a live job, nothing is written and that job's
        current result is returned (and ``task_enqueued`` is not sent).

        Raises:
            InvalidTask: see :meth:`validate_task`.
            InvalidTaskBackend: the ``TASKS`` entry is invalid.
            jobqueue.errors.InvalidPayload: an argument is not JSON (the message names it); a
                ``TypeError`` (and a ``ValueError``), as Django's backends raise.
            jobqueue.errors.QueueUnavailable: the queue's database cannot be reached.
        """
        self._raise_config_error()
        self.validate_task(task)
        # As Django's TaskResult does, so the task gets what Django's own backends would hand
        # it; with keys as JSON stores them, so this result equals what get_result reads.
        args, kwargs = normalize(list(args), "args"), normalize(dict(kwargs), "kwargs")
        payload = {
            "args": args,
            "kwargs": kwargs,
            "backend": self.alias,
            "run_after": task.run_after.isoformat() if task.run_after else None,
        }
        extras = extras_to_payload(task)
        if extras:
            # The task's own options, so get_result reads back the task as enqueued.
            payload["task_options"] = extras
        # Function-level imports here, in get_result and in run_registered_task, on purpose: this
        # module must import without jobqueue's models, so that a project listing the backend
        # but not the app gets jobqueue.E006 (check()), not an import error.
        from jobqueue.client import enqueue_or_get

        options = job_options(task, self.config, args, kwargs)
        job_id, created, enqueued_at = enqueue_or_get(
            task.module_path, payload, options, using=self.using
        )
        if not created:
            return self.get_result(str(job_id))
        result: TaskResult = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,  # the row's: the database clock, as get_result reads it
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
        from jobqueue.tasks.results import read_result  # function-level: see enqueue

        return read_result(result_id, self, self.using)

    def check(self, **kwargs: Any) -> list[Any]:
        """Report this entry when the ``jobqueue`` app is not installed (jobqueue.E006).

        Django runs this check whatever the installed apps are; jobqueue's own checks
        (``jobqueue.checks``, E002 for this entry's options) are registered by the app.
        """
        if apps.is_installed("jobqueue"):
            return []
        return [
            checks.Error(
                f"TASKS[{self.alias!r}] uses JobQueueBackend, but the jobqueue app is not in "
                "INSTALLED_APPS: its tables are never created, so every enqueue fails.",
                hint='Add "jobqueue" to INSTALLED_APPS and run `manage.py migrate`.',
                id="jobqueue.E006",
            )
        ]


# -- the job type of a task ----------------------------------------------------------------


def _queue_backend(alias: str) -> JobQueueBackend:
    backend = task_backends[alias]
    if not isinstance(backend, JobQueueBackend):
        raise InvalidTaskBackend(
            f"TASKS[{alias!r}] is not a JobQueueBackend in this process, but it enqueued the task"
        )
    return backend


def _run_task(context: JobContext, **payload: Any) -> Any:
    """Internal: the handler of every task's job type; the executor calls it with the payload.

    Runs the task with the backend that enqueued it (``payload["backend"]``), see
    :func:`jobqueue.tasks.runner.run_task`. Exceptions propagate, and the executor decides retry
    or dead as for any job.

    Raises:
        InvalidTaskBackend: that alias is not a ``JobQueueBackend`` in this process.
    """
    from jobqueue.tasks.runner import run_task  # function-level: see JobQueueBackend.enqueue

    backend = _queue_backend(payload.get("backend") or "default")
    return run_task(context, backend, backend.using)


def _register_task(type_name: str, task: Task, backoff: Backoff | None) -> JobType:
    """Register ``task`` as job type ``type_name`` unless the name is taken; return the holder."""
    return register(
        JobType(
            _run_task,
            name=type_name,
            queue=task.queue_name,
            priority=task.priority,
            max_attempts=None,
            timeout_s=None,
            backoff=backoff,
            takes_context=True,
            rate_limit=_rate_of(task),
        )
    )


def _rate_of(task: Task) -> Limiter | None:
    """Return the rate limit ``@task(rate_limit=)`` declared, parsed; None for none."""
    declared = task_option(task, "rate_limit")
    return None if declared is None else parse_rate(declared, f"task {task.module_path} rate_limit")


def task_job_type(type_name: str) -> JobType:
    """Internal: return the job type of the ``django.tasks`` task at ``type_name``.

    For a task declared for another backend and enqueued here with ``.using(backend=...)``:
    its module's import registered nothing, so the executor asks here.

    Raises:
        UnknownJobType: nothing importable at that path is a task; when the import failed,
            the message says why and the ``ImportError`` is its ``__cause__``.
    """
    try:
        found = import_string(type_name)
    except ImportError as exc:
        # Chained, so the job's history keeps the import error's own traceback.
        raise UnknownJobType(
            type_name, f"importing it failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(found, Task):
        raise UnknownJobType(
            type_name, f"it is a {type(found).__name__}, neither a @job nor a django.tasks task"
        )
    return _register_task(type_name, found, None)
