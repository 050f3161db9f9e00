"""``jobqueue.chain(a, b, c)``: jobs that run one after the other (``jobqueue.step``: the client).

A step is a job not yet enqueued: its type, payload and ``enqueue`` options
(``jobqueue.step(send_report, {"day": day}, queue="reports")``, or the ``@job`` function's
``send_report.step(day=day)``). ``chain`` enqueues every step in one transaction, each
``after`` the one before, so step 2 runs once step 1 has succeeded, and a dead or cancelled step
cancels the steps after it (cancelling the first cancels what has not run; retrying a dead step
runs the rest). A step with ``takes_parent_results=True`` gets the previous step's result as
``parent_results[0]``.
"""

from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from jobqueue import arguments, routing
from jobqueue.client import Step, enqueue_or_get
from jobqueue.errors import InvalidJobOption
from jobqueue.registry import JobType, registered

__all__ = ["chain"]


def chain(*steps: Step, after: list[int] | None = None, using: str | None = None) -> list[int]:
    """Enqueue ``steps`` to run one after the other; return their ids, in order.

    All or nothing, in the caller's transaction (a savepoint) or in one of its own. The first
    step waits for ``after`` (None: runs at once); each next one for the step before it.

    Raises:
        InvalidJobOption: no steps, a step that is not a :class:`Step`, a step's bad option, or
            a step of a type not registered here without a ``queue``
            (``steps[<index>].job_type``); ``option`` names it as ``steps[<index>]...``.
            InvalidPayload as :func:`jobqueue.enqueue`. Nothing written.
    """
    if not steps:
        raise InvalidJobOption("steps", "a chain needs at least one step")
    queues: list[str] = []
    for index, one in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(one, Step):
            raise InvalidJobOption(where, f"must be a jobqueue.step(...), got {one!r:.100}")
        queues.append(one.options.queue or _default_queue(one.job_type, where))
    # One database for every step: each finds the step before it there (routing.group_alias).
    explicit = None if using is None else arguments.alias(using)
    using = routing.group_alias(queues[0], explicit)
    for index, queue in enumerate(queues):
        routing.require_lives_on(queue, using, f"steps[{index}].queue")
    ids: list[int] = []
    with transaction.atomic(using=using):
        for index, one in enumerate(steps):
            where = f"steps[{index}]"
            parents = [ids[-1]] if ids else after
            try:
                job_id, _, _ = enqueue_or_get(
                    one.job_type,
                    one.payload,
                    replace(one.options, queue=queues[index]),
                    using=using,
                    after=parents,
                    run_on_parent_failure=one.run_on_parent_failure,
                    takes_parent_results=one.takes_parent_results,
                )
                ids.append(job_id)
            except InvalidJobOption as exc:
                raise InvalidJobOption(f"{where}.{exc.option}", exc.problem) from None
    return ids


def _default_queue(job_type: str | JobType, where: str) -> str:
    found = job_type if isinstance(job_type, JobType) else registered(job_type)
    if found is None:
        # Name the type: the queue is missing only because this type is unknown here.
        raise InvalidJobOption(
            f"{where}.job_type",
            f"{job_type!r} is not registered here, so its queue is unknown: give the step queue=",
        )
    return found.queue
