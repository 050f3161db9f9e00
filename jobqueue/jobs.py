"""The ``@job`` decorator: a function becomes a registered job type that can enqueue itself.

This sits above both the registry (:mod:`jobqueue.jobtypes`) and the producer API
(:mod:`jobqueue.client`): the registry and the client never import it, so ``.enqueue`` on a job
type needs no import cycle. The registry's names are re-exported here, where users and tests
have always found them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobqueue.client import enqueue
from jobqueue.flows.chains import STEP_OPTIONS, Step, step
from jobqueue.jobtypes import (
    ENQUEUE_OPTIONS,
    JobType,
    declare,
    register,
    registered,
    registry,
    resolve,
    signature_of,
)
from jobqueue.worker.context import JobContext

__all__ = [
    "ENQUEUE_OPTIONS",
    "JobContext",
    "JobFunction",
    "JobType",
    "job",
    "register",
    "registered",
    "registry",
    "resolve",
    "signature_of",
]


class JobFunction(JobType):
    """What ``@job`` returns: the handler (call it to run it here) and a job type to enqueue."""

    def enqueue(self, **kwargs: Any) -> int:
        """Enqueue a job of this type; payload and options are both keyword arguments.

        Keyword arguments named like :data:`ENQUEUE_OPTIONS` (``run_at``, ``delay``,
        ``priority``, ``dedupe_key``, ``max_attempts``, ``timeout_s``, ``tenant_id``,
        ``ordering_key``, ``concurrency_key``, ``concurrency_limit``, ``using``, ``queue``) are
        options; the rest is the payload passed to
        the handler. Options left out take this type's defaults, then the ``JOBQUEUE`` settings.

        Returns:
            The job id (an existing job's id when its dedupe key is live).

        Raises:
            InvalidPayload, InvalidJobOption: as :func:`jobqueue.enqueue`.
        """
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in ENQUEUE_OPTIONS}
        queue = options.pop("queue", None) or self.queue
        return enqueue(queue, self, kwargs, **options)

    def step(self, **kwargs: Any) -> Step:
        """Return a step of ``jobqueue.chain`` running this type: payload and options, as enqueue.

        Keyword arguments named like :data:`~jobqueue.flows.chains.STEP_OPTIONS` are options; the
        rest
        is the payload.

        Raises:
            InvalidJobOption: as :func:`jobqueue.step`.
        """
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in STEP_OPTIONS}
        return step(self, kwargs, **options)


def job(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    queue: str = "default",
    priority: int = 0,
    max_attempts: int | None = None,
    timeout_s: float | None = None,
    backoff: dict[str, Any] | None = None,
    takes_context: bool = False,
    dependency: str | None = None,
    rate_limit: str | float | dict[str, Any] | None = None,
    concurrency_key: str | Callable[..., str | None] | None = None,
    concurrency_limit: int | None = None,
) -> Any:
    """Register a function as a job type. Use as ``@job`` or ``@job(queue="emails", ...)``.

    The handler receives the payload as keyword arguments; with ``takes_context=True`` its first
    positional argument is a :class:`JobContext`.

    Args:
        func: the handler (when used without parentheses).
        name: the type name stored in each job; defaults to the dotted path
            ``module.qualname``, which lets any worker import it on demand.
        queue: default queue for ``.enqueue``.
        priority: default priority, -100..100, higher runs sooner.
        max_attempts: default attempts (>= 1); ``None`` uses ``JOBQUEUE["MAX_ATTEMPTS"]``.
        timeout_s: default hard limit on one run, seconds; ``None`` uses the setting.
        backoff: ``{"policy", "base_seconds", "cap_seconds"}`` for this type's retries.
        takes_context: pass a :class:`JobContext` as the first argument.
        dependency: the service the handler calls (``"partner-api"``), named like a queue;
            several types may share one. Its failures feed that dependency's circuit breaker,
            and while the breaker is open, jobs of the type wait without spending attempts.
        rate_limit: at most this many jobs of the type start, across all workers: ``"10/s"``,
            ``"600/min"``, or ``{"rate": "10/s", "burst": 20}`` (README, "Flow control: rate
            limits"). ``JOBQUEUE["RATE_LIMITS"]["type"]`` overrides it. Every worker that may
            claim the type must have it registered (as for ``dependency``).
        concurrency_key: what at most ``concurrency_limit`` jobs may run of at once, across all
            workers: a fixed key, or a function of the payload's keyword arguments returning
            one (``lambda account_id, **_: f"acct:{account_id}"``) or None (not limited),
            called once at enqueue. Without it, ``concurrency_limit`` limits the type itself.
        concurrency_limit: most leased jobs per key, 1..1,000,000 (``JOBQUEUE
            ["CONCURRENCY_LIMITS"]`` overrides it per key).

    Returns:
        A :class:`JobFunction` (or a decorator producing one).

    Raises:
        ImproperlyConfigured: a bad default, a handler parameter that collides with an enqueue
            option name, or a second registration of the same name by another function.
    """

    def make(f: Callable[..., Any]) -> JobFunction:
        return declare(
            f,
            JobFunction,
            name=name,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            backoff=backoff,
            takes_context=takes_context,
            dependency=dependency,
            rate_limit=rate_limit,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
        )

    return make(func) if func is not None else make
