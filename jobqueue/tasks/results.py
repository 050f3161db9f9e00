"""Internal: jobs of ``django.tasks`` tasks described as Django's ``TaskResult``.

The one mapping of job states to ``TaskResultStatus`` (``to_task_result_status``), the reading of
a task's job by its result id (``read_result``), and the building of a ``TaskResult`` from a job row
(``to_task_result``): its task as enqueued, one ``TaskError`` per failed attempt, one worker id
per attempt.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.apps import apps
from django.core.exceptions import ObjectDoesNotExist
from django.tasks import Task, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError, TaskResultStatus
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
from django.utils.module_loading import import_string

from jobqueue.states import JobState
from jobqueue.tasks.options import JobQueueTask, extras_from_payload

__all__ = [
    "read_job",
    "read_result",
    "to_task_result",
    "to_task_result_status",
    "worker_ids",
]

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
    JobState.WAITING: TaskResultStatus.READY,
}


def to_task_result_status(state: str) -> TaskResultStatus:
    """Return Django's status for a job state: the one mapping between the two.

    ``ready``, ``scheduled`` (delayed, or waiting to retry) and ``waiting`` (for parent jobs)
    are READY (not started), ``leased`` is RUNNING,
    ``succeeded`` is SUCCESSFUL, ``dead`` and ``cancelled`` are FAILED.
    """
    return _STATUS[JobState(state)]


def read_job(job_id: int, using: str) -> Any:
    """Internal: return the ``Job`` row ``job_id`` on the database ``using``.

    Raises:
        jobqueue.models.Job.DoesNotExist: no job has that id.
    """
    # By name through the app registry, not imported: ``jobqueue.backends`` re-exports this
    # module and must import without jobqueue's models (jobqueue.E006 reports the missing app).
    return apps.get_model("jobqueue", "Job").objects.using(using).get(id=job_id)


def read_result(result_id: Any, backend: BaseTaskBackend, using: str) -> TaskResult:
    """Internal: return the current result of the task whose job id is ``result_id``.

    Args:
        result_id: a ``TaskResult.id`` (a decimal string), or a job id (int).
        backend: the backend asked (see :func:`to_task_result`).
        using: alias of the queue's database.

    Raises:
        TaskResultDoesNotExist: the id is malformed or out of ``bigint`` range, no job has it,
            or the job is not a ``django.tasks`` task.
    """
    text = str(result_id) if isinstance(result_id, int) else result_id
    if not isinstance(text, str) or not _JOB_ID.fullmatch(text) or int(text) > _MAX_JOB_ID:
        raise TaskResultDoesNotExist(result_id)
    try:
        job = read_job(int(text), using)
    except ObjectDoesNotExist:
        raise TaskResultDoesNotExist(result_id) from None
    return to_task_result(job, backend)


def _task_for(job: Any, backend: BaseTaskBackend) -> Task:
    """Return the task a job runs, as enqueued (priority, queue, backend, run_after, extras)."""
    try:
        base = import_string(job.type)
    except ImportError:
        raise TaskResultDoesNotExist(f"{job.id}: task {job.type!r} cannot be imported") from None
    payload = job.payload if isinstance(job.payload, dict) else {}
    if not isinstance(base, Task) or not {"args", "kwargs"} <= set(payload):
        raise TaskResultDoesNotExist(f"{job.id}: job type {job.type!r} is not a django.tasks task")
    run_after = payload.get("run_after")
    # jobqueue's own options (.using(max_attempts=...)) as set on the task, not the row's
    # effective values; only a JobQueueTask has them.
    extras = extras_from_payload(payload.get("task_options"))
    try:
        return replace(
            base,
            priority=job.priority,
            queue_name=job.queue,
            backend=payload.get("backend") or backend.alias,
            run_after=datetime.fromisoformat(run_after) if run_after else None,
            **(extras if isinstance(base, JobQueueTask) else {}),
        )
    except (InvalidTask, InvalidTaskBackend, ValueError):
        # The settings changed since the job was enqueued (a queue or alias gone): describe
        # the job with the task as declared rather than not at all.
        return base


#: jobqueue's errors that a ``django.tasks`` result names by the class Django's own backends
#: record for the same failure: a return value ``normalize_json`` refuses is its ``TypeError``
#: there. The job's history keeps jobqueue's class (its own API keeps its errors).
_AS_DJANGO_RECORDS = {"jobqueue.errors.ResultNotJSON": "builtins.TypeError"}


def _exception_class_path(entry: dict[str, Any]) -> str:
    path = entry.get("exception_class_path")
    if path:
        return _AS_DJANGO_RECORDS.get(path, path)
    if entry.get("kind") == "lease_expired":
        return "jobqueue.errors.LeaseLost"
    name = entry.get("type") or "Exception"
    if isinstance(getattr(builtins, name, None), type):
        return f"builtins.{name}"
    return _AS_DJANGO_RECORDS.get(name, name)


def _errors(job: Any) -> list[TaskError]:
    return [
        TaskError(
            exception_class_path=_exception_class_path(entry),
            traceback=entry.get("traceback") or entry.get("message", ""),
        )
        for entry in job.errors or []
        if entry.get("kind", "error") in _FAILED_ATTEMPT_KINDS
    ]


def worker_ids(job: Any, attempts: int, current_worker: str | None = None) -> list[str]:
    """Internal: return one worker id per attempt (so ``TaskResult.attempts`` counts attempts).

    Args:
        job: the ``Job`` row.
        attempts: attempts to describe (the job's, or the running attempt's number).
        current_worker: the worker of the last attempt; None: the job's ``leased_by``.

    Returns:
        ``attempts`` worker ids, oldest first, counted since the last operator retry.
    """
    by_attempt: dict[int, str] = {}
    for entry in job.errors or []:
        if entry.get("kind") == "operator_retry":
            by_attempt.clear()  # attempts count again from 1 after an operator retry
        elif entry.get("kind", "error") in _FAILED_ATTEMPT_KINDS and entry.get("worker"):
            by_attempt[entry.get("attempt", 0)] = entry["worker"]
    last = current_worker or job.leased_by
    return [by_attempt.get(n, last) for n in range(1, attempts)] + ([last] if attempts else [])


def to_task_result(job: Any, backend: BaseTaskBackend) -> TaskResult:
    """Describe a job of a ``django.tasks`` task as Django's ``TaskResult``.

    ``errors`` has one ``TaskError`` per failed attempt (an expired lease counts, as
    ``jobqueue.errors.LeaseLost``); ``worker_ids`` one worker per attempt since the last operator
    retry; ``started_at`` and ``last_attempted_at`` are both the start of the latest attempt.

    Args:
        job: the ``Job`` row.
        backend: the backend describing it (its alias names the task's backend when the job's
            payload does not).

    Raises:
        TaskResultDoesNotExist: the job is not a task (see ``JobQueueBackend.get_result``).
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
        worker_ids=worker_ids(job, job.attempts),
    )
    if job.state == JobState.SUCCEEDED:
        object.__setattr__(result, "_return_value", job.result)
    return result
