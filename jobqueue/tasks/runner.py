"""Internal: run one ``django.tasks`` task inside a worker, as Django's backends do.

The job handler of a task's job type (``jobqueue.tasks.backend``) finds the backend that enqueued
the task and calls :func:`run_task`: it describes the job as a RUNNING ``TaskResult``, sends
``task_started``, calls the task, and sends ``task_finished``. Retries, timeouts and dead letters
stay the executor's.
"""

from __future__ import annotations

import logging
from traceback import format_exception
from typing import Any

from django.tasks import TaskContext, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from jobqueue.errors import InvalidPayload, ResultNotJSON
from jobqueue.payloads import to_json
from jobqueue.retries import dead_reason
from jobqueue.tasks.results import read_job, to_task_result, worker_ids
from jobqueue.worker.context import JobContext

__all__ = ["run_task"]

# The name the backend logged under before it became a package: logging settings keep working.
logger = logging.getLogger("jobqueue.backends")


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


def _storable(value: Any) -> Any:
    """Return a task's return value as Django's backends store it (``normalize_json``).

    Raises:
        ResultNotJSON: Django's normalisation refuses it (as the immediate backend does, with a
            ``TypeError``), or the database cannot hold it (NaN, a NUL character).
    """
    try:
        normalized = normalize_json(value)
        to_json(normalized, root="return_value")
    except (TypeError, ValueError) as exc:  # InvalidPayload is both
        why = f"{exc.path}: {exc.problem}" if isinstance(exc, InvalidPayload) else str(exc)
        raise ResultNotJSON(f"the task's return value is not JSON: {why}") from exc
    return normalized


def run_task(context: JobContext, backend: BaseTaskBackend, using: str) -> Any:
    """Internal: run the task of the job ``context.job_id`` and send Django's task signals.

    Loads the job's result, sends ``task_started``, calls the task (an async one runs to
    completion on its own event loop) with a ``TaskContext`` if it takes one, and sends
    ``task_finished``: inside the exception handler on failure, so Django's logging records the
    traceback. A receiver that fails is logged, not raised.

    Args:
        context: the run's context, from the executor.
        backend: the backend that enqueued the task (the signals' sender is its class).
        using: alias of the queue's database.

    Returns:
        The task's return value, normalised as Django's backends do (``bytes`` to text, tuples
        to lists).

    Raises:
        ResultNotJSON: the task returned a value JSON cannot hold; the task fails (a
            ``TypeError``, as in Django's immediate backend), without retries.
        BaseException: whatever the task raised; the executor decides retry or dead as for any
            job. ``jobqueue.models.Job.DoesNotExist``: the job row is gone.
    """
    # The claim returned no error history, enqueue time or attempt starts: the row has them.
    job = read_job(context.job_id, using)
    result = to_task_result(job, backend)
    object.__setattr__(result, "status", TaskResultStatus.RUNNING)
    object.__setattr__(result, "finished_at", None)
    object.__setattr__(result, "worker_ids", worker_ids(job, context.attempt, context.worker_id))
    sender = type(backend)
    _send(task_started, sender, result)
    task = result.task
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
        else:
            value = task.call(*result.args, **result.kwargs)
        if not context.should_stop:
            value = _storable(value)
    except BaseException as exc:
        # The executor's rule (retries.decide): is this attempt the job's last?
        final = dead_reason(context.attempt, context.max_attempts, exc) is not None
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
    object.__setattr__(result, "_return_value", value)
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    _send(task_finished, sender, result)
    return value
