"""Batches: jobs enqueued together whose end enqueues a callback job, once per completion.

``with jobqueue.batch(on_complete=report, payload={"day": d}) as b: b.enqueue(...)`` writes a
batch row and its members in the caller's transaction (a rollback leaves neither). From then on
the database keeps the counts: the statement that moves a member's state into or out of
succeeded, dead or cancelled moves them (``finish_many.sql`` for a run's outcome, migration
0016_batches's row trigger for cancels and retries), and the update that brings ``pending`` to
zero inserts the callback jobs in the same statement (docs/decisions.md, "Batches"). A
callback runs as any job, with two keyword arguments:

* ``batch``: ``{"id", "total", "succeeded", "dead", "cancelled", "completion"}`` as they were at
  that completion (``completion`` counts from 1: an operator retry of a dead or cancelled member
  reopens the batch, and its next completion fires the callbacks again);
* ``payload``: the ``payload`` given to :func:`batch` (``{}`` by default).

``on_success`` fires only when every member succeeded; ``on_complete`` whatever the outcomes.
A batch with no members completes when the block ends: its callbacks are enqueued then, with
zero counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from django.db import transaction

from jobqueue import arguments, routing
from jobqueue.client import enqueue_many as _enqueue_many
from jobqueue.client import enqueue_or_get
from jobqueue.errors import BatchNotFound, InvalidJobOption, JobNotFound
from jobqueue.models import Batch
from jobqueue.options import new_job
from jobqueue.payloads import to_json
from jobqueue.registry import PARENT_OPTIONS, EnqueueOptions, JobType
from jobqueue.store import NewJob, get_store

__all__ = ["BatchStatus", "OpenBatch", "batch", "batch_status"]

#: The ``batch`` argument of a callback as enqueue-time validation sees it (the counts come later).
_SAMPLE_COUNTS = {"id": 0, "total": 0, "succeeded": 0, "dead": 0, "cancelled": 0, "completion": 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStatus:
    """A batch's counts as read now (``jobqueue.batch_status``)."""

    id: int
    total: int
    pending: int
    succeeded: int
    dead: int
    cancelled: int
    #: Times pending reached zero (0 while open; > 1 after a retried member finished again).
    completions: int
    completed_at: datetime | None
    success_job_id: int | None
    complete_job_id: int | None

    @property
    def done(self) -> bool:
        """Whether every member is finished and the callbacks were enqueued."""
        return self.pending == 0 and self.completions > 0


def _callback(
    kind: str, job_type: str | JobType, queue: str | None, payload: dict[str, Any]
) -> NewJob:
    """Validate a callback as the job it will be (its type's options resolved), writing nothing."""
    option = f"on_{kind}"
    try:
        return new_job(
            job_type,
            {"batch": _SAMPLE_COUNTS, "payload": payload},
            EnqueueOptions(queue=queue),
            queue_given=queue is not None,
        )
    except InvalidJobOption as exc:
        raise InvalidJobOption(f"{option}.{exc.option}", exc.problem) from None


class OpenBatch:
    """The batch of a ``with jobqueue.batch(...) as b:`` block: enqueue its members through it.

    ``id`` is the batch's id (``jobqueue.batch_status(b.id)``); ``members`` counts the members
    enqueued so far.
    """

    def __init__(
        self, callbacks: list[tuple[str, NewJob]], payload: dict[str, Any], using: str
    ) -> None:
        self._callbacks = callbacks
        self._payload = payload
        self._using = using
        self._atomic: Any = None
        self.id = 0
        self.members = 0

    def __enter__(self) -> OpenBatch:
        # One transaction for the batch row and every member: a savepoint in the caller's, or
        # one of its own. Members are invisible to workers until it commits, so none can finish
        # (and complete the batch early) before the last one has joined.
        self._atomic = transaction.atomic(using=self._using)
        self._atomic.__enter__()
        try:
            specs = [
                {"kind": kind, "type": job.type, "queue": job.queue, "priority": job.priority,
                 "max_attempts": job.max_attempts, "timeout_s": job.timeout_s}
                for kind, job in self._callbacks
            ]  # fmt: skip
            self.id = get_store(self._using).create_batch(to_json(self._payload), json.dumps(specs))
        except BaseException as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            self._atomic = None
            raise
        return self

    def _open(self) -> None:
        if self._atomic is None:
            raise InvalidJobOption("batch", "is closed: enqueue members inside its with block")

    def enqueue(
        self,
        queue: str,
        job_type: str | JobType,
        payload: dict[str, Any] | None = None,
        **options: Any,
    ) -> int:
        """Enqueue one member: ``jobqueue.enqueue``'s arguments but ``dedupe_key`` and ``using``.

        Returns:
            The member's job id.

        Raises:
            InvalidJobOption: the batch's block has ended, or ``dedupe_key``/``using`` was given
                (a deduplicated member could be another batch's job), or as ``jobqueue.enqueue``.
            InvalidPayload, QueueUnavailable: as ``jobqueue.enqueue``.
        """
        self._open()
        _refuse(options, "")
        if isinstance(queue, str):
            routing.require_lives_on(queue, self._using, "queue")
        parents = {name: options.pop(name) for name in PARENT_OPTIONS if name in options}
        job_id, _, _ = enqueue_or_get(
            job_type,
            payload,
            EnqueueOptions(queue=queue, **options),
            using=self._using,
            **parents,
        )
        self.members += get_store(self._using).add_batch_members(self.id, [job_id])
        return job_id

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Enqueue many members in one statement: ``jobqueue.enqueue_many``'s job mappings.

        Returns:
            Their job ids, in order.

        Raises:
            InvalidJobOption: the batch's block has ended, a job has a ``dedupe_key``, or as
                ``jobqueue.enqueue_many`` (which writes nothing when one job is bad).
            InvalidPayload, QueueUnavailable: as ``jobqueue.enqueue_many``.
        """
        self._open()
        plain = isinstance(jobs, Iterable) and not isinstance(jobs, Mapping | str | bytes)
        specs = list(jobs) if plain else jobs
        for index, spec in enumerate(specs):
            if isinstance(spec, Mapping):
                _refuse(spec, f"jobs[{index}].")
                if isinstance(spec.get("queue"), str):
                    routing.require_lives_on(spec["queue"], self._using, f"jobs[{index}].queue")
        ids = _enqueue_many(specs, using=self._using)
        self.members += get_store(self._using).add_batch_members(self.id, ids)
        return ids

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        atomic, self._atomic = self._atomic, None
        if exc_type is None and self.members == 0:
            try:
                self._complete_empty()
            except BaseException as error:
                atomic.__exit__(type(error), error, error.__traceback__)
                raise
        return atomic.__exit__(exc_type, exc, tb)

    def _complete_empty(self) -> None:
        """No member will ever finish: enqueue the callbacks now, as the last one would."""
        payload = {"batch": {**_SAMPLE_COUNTS, "id": self.id}, "payload": self._payload}
        fired: dict[str, int] = {}
        for kind, job in self._callbacks:
            fired[kind], _, _ = enqueue_or_get(
                job.type,
                payload,
                EnqueueOptions(
                    queue=job.queue,
                    priority=job.priority,
                    max_attempts=job.max_attempts,
                    timeout_s=job.timeout_s,
                ),
                using=self._using,
            )
        get_store(self._using).close_empty_batch(
            self.id, fired.get("success"), fired.get("complete")
        )


def _refuse(options: Mapping[str, Any], where: str) -> None:
    """Refuse the enqueue options a member cannot take."""
    for name in ("dedupe_key", "using"):
        if options.get(name) is not None:
            raise InvalidJobOption(
                f"{where}{name}",
                "batch members take no dedupe_key (the live job it names may not be in this "
                "batch) and no using (the batch's using applies)",
            )


def batch(
    *,
    on_success: str | JobType | None = None,
    on_complete: str | JobType | None = None,
    payload: dict[str, Any] | None = None,
    queue: str | None = None,
    using: str | None = None,
) -> OpenBatch:
    """Open a batch: ``with jobqueue.batch(...) as b: b.enqueue(...)``.

    The batch row and its members commit with the caller's transaction (the block is an
    ``atomic()``: a savepoint in the caller's transaction, or a transaction of its own); an
    exception in the block leaves no batch and no member. When its last member finishes
    (succeeded, dead or cancelled), the callbacks are enqueued in the same transaction as that
    outcome, once per completion. A block that enqueues nothing completes at its end.

    Args:
        on_success: job type (name or ``@job`` function) enqueued when every member succeeded.
        on_complete: job type enqueued when every member finished, whatever the outcome.
        payload: JSON object handed to the callbacks as their ``payload`` argument.
        queue: the callbacks' queue; default their type's ``@job(queue=)``, else ``"default"``.
        using: database alias of the batch and its members; default ``"default"``.

    Returns:
        An :class:`OpenBatch` to use as a context manager.

    Raises:
        InvalidJobOption: a bad queue or using, a callback type not registered here (unless
            ``ENQUEUE_UNREGISTERED`` allows it), or a callback that does not take the keyword
            arguments ``batch`` and ``payload``; ``option`` names ``on_success``/``on_complete``.
        InvalidPayload: ``payload`` is not a JSON object, or too large.
    """
    explicit = None if using is None else arguments.alias(using)
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidJobOption("payload", f"must be a dict, got {type(payload).__name__}")
    to_json(payload)
    callbacks = [
        (kind, _callback(kind, job_type, queue, payload))
        for kind, job_type in (("success", on_success), ("complete", on_complete))
        if job_type is not None
    ]
    # The batch row, its members and its callbacks share one database (routing.group_alias):
    # the outcome that completes the batch enqueues the callbacks in its own transaction.
    using = routing.group_alias(callbacks[0][1].queue if callbacks else queue, explicit)
    for kind, job in callbacks:
        routing.require_lives_on(job.queue, using, f"on_{kind}.queue")
    return OpenBatch(callbacks, payload, using)


def batch_status(batch_id: int, *, using: str | None = None) -> BatchStatus:
    """Return the counts of batch ``batch_id`` as they are now.

    Raises:
        BatchNotFound: no batch has this id (or it is not an integer in 1..bigint).
        InvalidJobOption: a bad ``using``.
    """
    using = arguments.alias(using)
    try:
        batch_id = arguments.job_id(batch_id)  # the same id rule as jobs: an int in 1..bigint
    except JobNotFound:
        raise BatchNotFound(batch_id) from None
    row = Batch.objects.using(using).filter(id=batch_id).first()
    if row is None:
        raise BatchNotFound(batch_id)
    return BatchStatus(
        id=row.id,
        total=row.total,
        pending=row.pending,
        succeeded=row.succeeded,
        dead=row.dead,
        cancelled=row.cancelled,
        completions=row.completions,
        completed_at=row.completed_at,
        success_job_id=row.success_job_id,
        complete_job_id=row.complete_job_id,
    )
