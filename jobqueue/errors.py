"""Exceptions raised by jobqueue, and the two that handlers raise to steer a retry.

Every error takes its default message from its class docstring, so most subclasses are two lines;
the ones that carry context (a job id, a JSON path) format it into the message.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

# MAX_DELAY_SECONDS lives in validation; re-exported here, where callers have long imported it.
from jobqueue.validation import MAX_DELAY_SECONDS, is_number, validate_dependency_name

__all__ = [
    "BatchNotFound",
    "CronConfigurationError",
    "DatabaseFull",
    "DatabaseNotMigrated",
    "DatabasePermissionDenied",
    "DatabaseReadOnly",
    "DatabaseTimeout",
    "DuplicateJob",
    "InvalidCronExpression",
    "InvalidJobOption",
    "InvalidPayload",
    "JobCancelled",
    "JobFailed",
    "JobNotFound",
    "JobQueueConfigurationError",
    "JobQueueError",
    "JobTimeout",
    "LeaseLost",
    "PermanentError",
    "QueueUnavailable",
    "ResultNotJSON",
    "RetryAfter",
    "UnknownJobType",
    "UnregisteredJobType",
    "WaitError",
    "WaitTimeout",
]


class JobQueueError(Exception):
    """A jobqueue operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip().splitlines()[0])


class LeaseLost(JobQueueError):
    """The lease on this job is no longer held: another claim, the reaper or a cancel moved it."""

    def __init__(self, job_id: int, message: str | None = None) -> None:
        self.job_id = job_id
        super().__init__(
            message
            or f"lease on job {job_id} was lost: the job was reclaimed, reaped, cancelled "
            "or finished"
        )


class JobNotFound(JobQueueError, LookupError):
    """No job has this id."""

    def __init__(self, job_id: object) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id!r}")


class BatchNotFound(JobQueueError, LookupError):
    """No batch has this id."""

    def __init__(self, batch_id: object) -> None:
        self.batch_id = batch_id
        super().__init__(f"no batch with id {batch_id!r}")


class DuplicateJob(JobQueueError):
    """A live job already holds this dedupe key on this queue."""

    def __init__(self, queue: str, dedupe_key: str, existing_id: int | None = None) -> None:
        self.queue = queue
        self.dedupe_key = dedupe_key
        self.existing_id = existing_id
        super().__init__(
            f"job {existing_id} on queue {queue!r} already holds dedupe key {dedupe_key!r}"
        )


class InvalidPayload(JobQueueError, ValueError, TypeError):
    """The payload cannot be stored as JSON.

    A ``TypeError`` too: ``django.tasks`` code catches that for an argument JSON cannot hold.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"invalid payload at {path}: {problem}")


class InvalidJobOption(JobQueueError, ValueError):
    """An enqueue option (queue, priority, run_at, max_attempts...) has a bad value."""

    def __init__(self, option: str, problem: str) -> None:
        self.option = option
        self.problem = problem
        super().__init__(f"invalid {option}: {problem}")


class UnknownJobType(JobQueueError, LookupError):
    """No handler is registered for this job type."""

    def __init__(self, job_type: str, reason: str = "") -> None:
        self.job_type = job_type
        self.reason = reason
        super().__init__(
            f"no handler registered for job type {job_type!r}: {reason}"
            if reason
            else f"no handler registered for job type {job_type!r} "
            "(is its module imported, or named jobs.py in an installed app?)"
        )


class UnregisteredJobType(UnknownJobType, InvalidJobOption):
    """Enqueue refused a job type that no handler registers in this process.

    An :class:`UnknownJobType` (its ``job_type`` names it) and an :class:`InvalidJobOption`
    (its ``option`` says which argument, ``jobs[3].job_type`` in ``enqueue_many``).
    """

    def __init__(self, job_type: str, option: str = "job_type") -> None:
        prefix = job_type.rpartition(".")[0]
        example = f"[{prefix + '.'!r}]" if prefix else "True"
        problem = (
            f"job type {job_type!r} is not registered in this process. Define it with @job "
            "(or @task) in a module this process imports (jobs.py or tasks.py of an installed "
            "app), or, if only the workers define it, allow it with "
            f"JOBQUEUE['ENQUEUE_UNREGISTERED'] = {example} (a list of type-name prefixes, or "
            "True for any name)"
        )
        self.job_type = job_type
        self.reason = "not registered in this process"
        self.option = option
        self.problem = problem
        JobQueueError.__init__(self, f"invalid {option}: {problem}")


class JobTimeout(JobQueueError, TimeoutError):
    """The job ran past its hard limit (``timeout_s``)."""

    def __init__(self, job_id: int, timeout_s: float) -> None:
        self.job_id = job_id
        self.timeout_s = timeout_s
        super().__init__(f"job {job_id} ran past its timeout of {timeout_s:g} s")


class WaitError(JobQueueError):
    """A wait for a job ended without its result (``jobqueue.wait``).

    Attributes:
        job_id: the job waited on.
        state: its state when the wait ended.
        last_error: the last entry of its error history (a dict), or None.
    """

    def __init__(
        self, job_id: int, state: str, message: str, last_error: dict | None = None
    ) -> None:
        self.job_id = job_id
        self.state = state
        self.last_error = last_error
        super().__init__(message)


class WaitTimeout(WaitError, TimeoutError):
    """The job did not finish within the wait's timeout (it may still finish later)."""

    def __init__(self, job_id: int, state: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(
            job_id, state, f"job {job_id} did not finish within {timeout_s:g} s (it is {state})"
        )


def _said(last_error: dict | None) -> str:
    if not last_error:
        return ""
    kind = last_error.get("type") or last_error.get("kind") or "error"
    return f": last error {kind}: {last_error.get('message', '')}"


class JobFailed(WaitError):
    """The job ended dead: its attempts were spent, or its error was permanent."""

    def __init__(self, job_id: int, dead_reason: str, last_error: dict | None = None) -> None:
        self.dead_reason = dead_reason
        super().__init__(
            job_id,
            "dead",
            f"job {job_id} is dead ({dead_reason or 'no reason recorded'}){_said(last_error)}",
            last_error,
        )


class JobCancelled(WaitError):
    """The job ended cancelled: it will not run (an operator or code cancelled it)."""

    def __init__(self, job_id: int, last_error: dict | None = None) -> None:
        super().__init__(
            job_id, "cancelled", f"job {job_id} was cancelled{_said(last_error)}", last_error
        )


class InvalidCronExpression(JobQueueError, ValueError):
    """The cron expression cannot be parsed."""


class QueueUnavailable(JobQueueError):
    """The queue's database could not be reached; nothing was written.

    Its subclasses name why, where the caller can act on it: :class:`DatabaseReadOnly`,
    :class:`DatabaseTimeout`, :class:`DatabaseFull`, :class:`DatabasePermissionDenied`,
    :class:`DatabaseNotMigrated`. A lost connection, a server shutting down or too many
    connections raise this class itself.

    Attributes:
        failure: the classification (``jobqueue.store.failures.Failure``: ``kind``, ``alias``,
            ``sqlstate``, ``message``), or None when raised without one.
    """

    failure: object | None = None


class DatabaseReadOnly(QueueUnavailable):
    """The queue's database is read-only (a failover to a replica?); nothing was written."""


class DatabaseTimeout(QueueUnavailable):
    """A statement or lock timeout ended the queue's statement; nothing was written."""


class DatabaseFull(QueueUnavailable):
    """The queue's database is out of disk space; nothing was written."""


class DatabasePermissionDenied(QueueUnavailable):
    """The queue's database role lacks a privilege jobqueue needs; nothing was written."""


class DatabaseNotMigrated(QueueUnavailable):
    """The queue's tables are missing or behind: run ``manage.py migrate``; nothing was written."""


class JobQueueConfigurationError(ImproperlyConfigured):
    """The JOBQUEUE setting is invalid.

    ``problems`` lists every bad key's message when several were found at once (check
    jobqueue.E001 reports each); the message joins them.
    """

    def __init__(self, message: str = "", problems: list[str] | None = None) -> None:
        self.problems = list(problems or [message])
        super().__init__(message or "; ".join(self.problems))


class CronConfigurationError(JobQueueConfigurationError):
    """An entry of ``JOBQUEUE["CRON"]`` is invalid (reported by the check jobqueue.E005)."""


class PermanentError(Exception):
    """Raised by a handler: this job can never succeed, dead-letter it now without retrying."""


class ResultNotJSON(PermanentError, TypeError):
    """A ``django.tasks`` task returned a value JSON cannot hold: the attempt fails, for good.

    A ``TypeError``, as in Django's immediate backend; permanent, since running the task again
    would return the same kind of value.
    """


class RetryAfter(Exception):
    """Raised by a handler: retry this job after exactly ``seconds`` (no jitter).

    The attempt still counts against ``max_attempts``, because attempts count claims. Naming a
    ``dependency`` also opens that dependency's circuit breaker for ``seconds``: every job of
    it waits, not only this one (a 503 with ``Retry-After`` speaks for the whole service).

    Args:
        seconds: delay before the next attempt, in seconds (>= 0), or a ``timedelta``.
        message: optional text recorded in the job's error history.
        dependency: a dependency name (as in ``@job(dependency=...)``) whose breaker to open.

    Raises:
        ValueError: ``seconds`` is not a number in 0..ten years, or ``dependency`` is not a
            valid name.
    """

    def __init__(
        self, seconds: float | timedelta, message: str = "", *, dependency: str | None = None
    ) -> None:
        if dependency is not None:
            validate_dependency_name(dependency)
        self.dependency = dependency
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        # NaN and infinity would reach the nack as a delay PostgreSQL refuses ("interval out of
        # range"): the failure could not be recorded and the job would sit leased until reaped.
        if not is_number(seconds, 0, MAX_DELAY_SECONDS):
            raise ValueError(
                f"RetryAfter seconds must be a number between 0 and {MAX_DELAY_SECONDS}, "
                f"got {seconds!r}"
            )
        self.seconds = float(seconds)
        super().__init__(message or f"retry requested after {seconds} s")
