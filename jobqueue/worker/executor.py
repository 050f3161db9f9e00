"""Internal: run one claimed job and turn what happened into a :class:`RunOutcome`.

``RunOutcome`` lives in :mod:`jobqueue.retries`, with the retry-or-dead rule that builds most of
them (the consumer's ``nack`` and the reaper build them too).

No SQL and no threads here: the worker claims, calls :func:`execute`, and records the outcome.
That seam lets the exception-to-outcome rules be tested without a database.

A handler's exception becomes text (an error-history entry) inside the ``except`` block that
caught it, and its traceback's frames are cleared there: nothing outlives that block that could
keep the handler's local variables alive (FIELD-CASES 32), even with the cycle collector off.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import logging
import random
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from jobqueue import signals
from jobqueue.errors import InvalidPayload
from jobqueue.history import RESULT_NOT_STORED_KIND, error_entry
from jobqueue.logging import job_extra
from jobqueue.masking import mask_entry, secrets_of
from jobqueue.models import Job
from jobqueue.payloads import to_json
from jobqueue.registry import JobType, policy_for, resolve_handler
from jobqueue.retries import RunOutcome, decide
from jobqueue.states import JobState
from jobqueue.store.interface import ClaimedJob
from jobqueue.tracing import run_span
from jobqueue.worker.context import JobContext

# BaseExceptionGroup is Python 3.11+ (None on 3.10, which has no exception groups).
_EXCEPTION_GROUP: type[BaseException] | None = getattr(builtins, "BaseExceptionGroup", None)

__all__ = ["execute", "execute_async", "failure_outcome", "is_async", "send_outcome_signal"]

logger = logging.getLogger("jobqueue.executor")


def failure_outcome(
    claimed: ClaimedJob,
    exc: BaseException,
    worker_id: str,
    duration_s: float = 0.0,
    rng: random.Random | None = None,
) -> RunOutcome:
    """Return the outcome of an attempt of ``claimed`` that raised ``exc``: retry or dead.

    The rule is :func:`jobqueue.retries.decide`'s, with the job type's backoff policy.

    The outcome keeps ``exc`` only as text; the frames of its traceback (and of the exceptions
    chained to it) are cleared here, so the handler's locals go as soon as ``exc`` does.

    The entry is recorded masked (``jobqueue.masking``): a message or traceback that echoes a
    value under a masked key of the payload, or a ``token=...``-style value, keeps ``********``
    in its place, so the history, the logs and every page show it masked.
    """
    entry = mask_entry(
        error_entry(exc, attempt=claimed.attempt, worker_id=worker_id), secrets_of(claimed.payload)
    )
    _clear_frames(exc)
    return decide(
        claimed.id,
        claimed.lease_token,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        error=exc,
        backoff=policy_for(claimed.job_type),
        entry=entry,
        duration_s=duration_s,
        rng=rng,
    )


def _clear_frames(exc: BaseException) -> None:
    """Drop the local variables of the finished frames ``exc`` and its chain passed through.

    A frame that holds the exception it raised (``except E as e: error = e``) is a reference
    cycle only the cycle collector frees; a cleared frame holds nothing. Frames still running
    (the caller's) are left alone.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        todo += [current.__cause__, current.__context__]
        if _EXCEPTION_GROUP is not None and isinstance(current, _EXCEPTION_GROUP):
            todo += current.exceptions  # type: ignore[attr-defined]


def _send_started(claimed: ClaimedJob, context: JobContext) -> None:
    if not signals.job_started.has_listeners(Job):
        # Most projects connect none: building the arguments was most of a send's cost.
        return
    responses = signals.job_started.send_robust(
        sender=Job,
        job_id=claimed.id,
        job_type=claimed.job_type,
        queue=claimed.queue,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        worker_id=context.worker_id,
        context=context,
    )
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error(
                "job %s: job_started receiver %r failed",
                claimed.id,
                receiver,
                exc_info=response,
                extra=job_extra(claimed, worker_id=context.worker_id),
            )
            # send_robust's frame holds the list that holds the exception: a cycle.
            _clear_frames(response)


def execute(
    claimed: ClaimedJob,
    context: JobContext,
    rng: random.Random | None = None,
    *,
    job_type: JobType | None = None,
) -> RunOutcome:
    """Run the handler of ``claimed`` with its payload and return the outcome.

    Args:
        claimed: the job, as the claim returned it.
        context: passed to handlers registered with ``takes_context=True``.
        rng: random source for backoff jitter (seed it in tests).
        job_type: the handler, if the caller resolved it already (the worker does, once per
            run); None resolves it here (:func:`jobqueue.registry.resolve_handler`).

    Returns:
        The :class:`RunOutcome`. Never raises for a handler's exception; ``KeyboardInterrupt`` and
        ``SystemExit`` from a handler are recorded as failures too, so a handler cannot stop
        the worker by raising them.
    """
    # The run's span (jobqueue/tracing.py: a no-op without OpenTelemetry), child of the
    # enqueue's, with the outcome as its status.
    with _traced(claimed) as span:
        outcome = _execute(claimed, context, rng, job_type)
        span.ended(outcome.state, outcome.error)
    return outcome


def _traced(claimed: ClaimedJob) -> Any:
    return run_span(
        job_id=claimed.id,
        job_type=claimed.job_type,
        queue=claimed.queue,
        attempt=claimed.attempt,
        tenant_id=claimed.tenant_id,
        trace=claimed.trace,
    )


def _execute(
    claimed: ClaimedJob,
    context: JobContext,
    rng: random.Random | None,
    job_type: JobType | None,
) -> RunOutcome:
    started = time.monotonic()
    try:
        if job_type is None:
            job_type = resolve_handler(claimed.job_type)
        _send_started(claimed, context)
        args = (context,) if job_type.takes_context else ()
        if inspect.iscoroutinefunction(job_type.func):
            # The outcome is made inside the coroutine: an exception escaping it would be kept
            # by its task, in a reference cycle through the event loop's frames.
            return asyncio.run(_execute_async(job_type.func, args, claimed, context, started, rng))
        result = job_type.func(*args, **claimed.payload)
    except BaseException as exc:  # noqa: BLE001 - every handler failure becomes an outcome
        return failure_outcome(claimed, exc, context.worker_id, time.monotonic() - started, rng=rng)
    return _success(claimed, result, started, context.worker_id)


def is_async(job_type: JobType | None) -> bool:
    """Return whether ``job_type``'s handler is an ``async def`` (it runs on the event loop).

    None (a type that could not be resolved) is not: its run records why on a thread.
    """
    return job_type is not None and inspect.iscoroutinefunction(job_type.func)


async def execute_async(
    claimed: ClaimedJob,
    context: JobContext,
    rng: random.Random | None = None,
    *,
    job_type: JobType,
    watch: Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]] | None = None,
) -> RunOutcome:
    """Await the ``async def`` handler of ``claimed`` on the running loop; return the outcome.

    The worker's event loop (``jobqueue/worker/eventloop.py``) runs many of these at once.
    Like :func:`execute`, it never raises for the handler: its exception, or the
    ``CancelledError`` of a task cancelled at the run's timeout, cancel request or lost lease,
    becomes a failure outcome (the worker has recorded the timeout already, the store turns
    a cancel request into ``cancelled``, and a lost lease's outcome is discarded).

    Args:
        claimed: the job, as the claim returned it.
        context: passed to handlers registered with ``takes_context=True``.
        rng: random source for backoff jitter (seed it in tests).
        job_type: the resolved handler; :func:`is_async` must be true of it.
        watch: wraps the handler's coroutine (the event loop times each of its steps).
    """
    with _traced(claimed) as span:  # current in this task only (a context variable)
        started = time.monotonic()
        try:
            _send_started(claimed, context)
            args = (context,) if job_type.takes_context else ()
            coro = job_type.func(*args, **claimed.payload)
            result = await (coro if watch is None else watch(coro))
        except BaseException as exc:  # noqa: BLE001 - as in execute()
            outcome = failure_outcome(
                claimed, exc, context.worker_id, time.monotonic() - started, rng=rng
            )
        else:
            outcome = _success(claimed, result, started, context.worker_id)
        span.ended(outcome.state, outcome.error)
    return outcome


async def _execute_async(
    func: Callable[..., Any],
    args: tuple,
    claimed: ClaimedJob,
    context: JobContext,
    started: float,
    rng: random.Random | None,
) -> RunOutcome:
    """Await an ``async def`` handler on :func:`execute`'s event loop; return its outcome."""
    try:
        result = await func(*args, **claimed.payload)
    except BaseException as exc:  # noqa: BLE001 - as in execute()
        return failure_outcome(claimed, exc, context.worker_id, time.monotonic() - started, rng=rng)
    return _success(claimed, result, started, context.worker_id)


def _success(claimed: ClaimedJob, result: object, started: float, worker_id: str) -> RunOutcome:
    """Return the outcome of a run that returned ``result``, storing it as JSON if it can.

    A result that cannot be stored leaves the job succeeded with a null result and an entry
    of kind ``result_not_stored`` in its history saying why (the admin and ``jobqueue show``
    list it; the ``django.tasks`` backend does not count it as a failed attempt).
    """
    duration = time.monotonic() - started
    error = None
    try:
        # Most handlers return None: its JSON needs no check and no encoding.
        result_json = "null" if result is None else to_json(result, root="result")
    except InvalidPayload as exc:
        # The work is done (its side effects happened), so the job succeeded; re-running it to
        # get a storable result would repeat them. Keep no result and say why.
        logger.warning(
            "job %s %s: result not stored: %s",
            claimed.id,
            claimed.job_type,
            exc,
            extra=job_extra(claimed, duration_s=duration),
        )
        result_json = "null"
        # On the job too, not only in a log line that may be gone when someone asks (issue 33).
        error = mask_entry(
            error_entry(
                exc, attempt=claimed.attempt, worker_id=worker_id, kind=RESULT_NOT_STORED_KIND
            ),
            secrets_of(claimed.payload),
        )
    return RunOutcome(
        job_id=claimed.id,
        lease_token=claimed.lease_token,
        state=JobState.SUCCEEDED,
        result_json=result_json,
        error=error,
        duration_s=duration,
    )


#: The signal of each state an outcome leaves a job in ("lost": discarded); any other: job_dead.
_OUTCOME_SIGNALS = {
    "lost": signals.job_lease_lost,
    "cancelled": signals.job_cancelled,
    "succeeded": signals.job_succeeded,
    "scheduled": signals.job_retrying,
}


def send_outcome_signal(
    claimed: ClaimedJob, outcome: RunOutcome, state: str, worker_id: str, using: str
) -> None:
    """Internal: send the signal for an outcome the worker just recorded (or lost).

    ``state`` is the job's state after the recording: ``succeeded`` (``job_succeeded``),
    ``scheduled`` (``job_retrying``), ``dead`` (``job_dead``), ``cancelled`` (``job_cancelled``:
    its cancel was requested while it ran), or ``"lost"`` (``job_lease_lost``: the outcome was
    discarded). Receivers' exceptions are logged, never raised: the outcome is already recorded.
    """
    signal = _OUTCOME_SIGNALS.get(state, signals.job_dead)
    if not signal.has_listeners(Job):
        # Nobody listens (most projects): skip building the arguments, which for a success
        # means decoding its result JSON, per job.
        return
    common = {
        "sender": Job,
        "job_id": claimed.id,
        "job_type": claimed.job_type,
        "queue": claimed.queue,
        "attempt": claimed.attempt,
        "max_attempts": claimed.max_attempts,
        "worker_id": worker_id,
    }
    extra: dict[str, Any]
    if state == "lost":
        extra = {"status": outcome.status}
    elif state == "cancelled":
        extra = {"using": using, "status": outcome.status}
    elif state == "succeeded":
        extra = {"result": json.loads(outcome.result_json), "duration_s": outcome.duration_s}
    elif state == "scheduled":
        extra = {
            "error": outcome.error,
            "delay_s": outcome.delay_s,
            "duration_s": outcome.duration_s,
        }
    else:
        extra = {
            "error": outcome.error,
            "reason": outcome.dead_reason,
            "duration_s": outcome.duration_s,
        }
    for receiver, response in signal.send_robust(**common, **extra):
        if isinstance(response, Exception):
            logger.error(
                "job %s: signal receiver %r failed",
                claimed.id,
                receiver,
                exc_info=response,
                extra=job_extra(claimed, worker_id=worker_id, duration_s=outcome.duration_s),
            )
            _clear_frames(response)
