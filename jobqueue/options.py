"""Internal: the one place where an enqueue's options meet its job type's ``@job`` defaults.

DESIGN.md: "Type defaults (@job(max_attempts=..., timeout_s=..., priority=..., queue=...)) apply
however a job of that type is enqueued". Every path that makes a job (``enqueue`` by name or by
object, ``enqueue_many``, ``JobType.enqueue``, cron fires, the ``django.tasks`` backend) builds an
:class:`EnqueueOptions` of what its caller gave and calls :meth:`EnqueueOptions.resolve`: an
explicit option wins, then the registered type's default, then the ``JOBQUEUE`` setting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from jobqueue.arguments import queue_name, validate_options
from jobqueue.errors import InvalidJobOption, UnknownJobType, UnregisteredJobType
from jobqueue.registry import JobType, registered, resolve
from jobqueue.settings.conf import get_settings

__all__ = [
    "EnqueueOptions",
    "ResolvedOptions",
    "allows_unregistered",
    "enqueue_type",
    "job_type_of",
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
