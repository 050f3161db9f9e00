"""Internal: the outbox part of the store seam: jobs written in a caller's transaction.

They are written on the caller's database, then relayed to their queue's database by the workers.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_outbox.py`` (``outbox_put.sql``, ``outbox_take.sql``, ``outbox_delete.sql``,
``relay_jobs.sql``, ``outbox_gauges.sql``), the generic store in ``generic_outbox.py``.

The job's id is drawn from the queue database's sequence at enqueue (:meth:`reserve_job_id`) and
written in the outbox row; the relay inserts the job under that id and does nothing when the id
is taken already, so relaying a row twice (a relay killed between its insert and its delete)
makes one job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from jobqueue.store.base import NewJob

#: Default cap of the outbox depth gauge: exact up to this, this value past it.
OUTBOX_COUNT_CAP = 10_000


def job_json(job: NewJob, job_id: int) -> str:
    """Return ``job`` as the JSON object the relay inserts (``relay_jobs.sql``'s fields).

    ``at`` is ``job.run_at`` (None: the store sets it to now plus ``delay_s`` at enqueue, by the
    caller's database clock, so a delay counts from the enqueue, not from the relay).
    """
    dumps = json.dumps
    return (
        f'{{"id":{job_id},"queue":{dumps(job.queue)},"type":{dumps(job.type)},'
        f'"payload":{job.payload_json},"priority":{job.priority},'
        f'"tenant_id":{dumps(job.tenant_id)},'
        f'"at":{dumps(job.run_at.isoformat()) if job.run_at is not None else "null"},'
        f'"max_attempts":{job.max_attempts},"timeout_s":{float(job.timeout_s)!r},'
        f'"dedupe_key":{dumps(job.dedupe_key)},"ordering_key":{dumps(job.ordering_key)},'
        f'"concurrency_key":{dumps(job.concurrency_key)},'
        f'"concurrency_limit":{dumps(job.concurrency_limit)}}}'
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRow:
    """One outbox row the relay took."""

    id: int
    #: The job's id on the queue database (its dedupe identity there).
    job_id: int
    #: The job as JSON text (:func:`job_json`, with ``at`` set).
    job: str
    #: When the caller wrote it (the caller's database clock), aware.
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxGauge:
    """The rows of one outbox waiting for one queue database. ``waiting`` is capped."""

    target: str
    waiting: int
    #: Seconds since the oldest waiting row was written (this database's clock); None: none waits.
    oldest_age_s: float | None


class OutboxStore(Protocol):
    """Write jobs to this database's outbox, relay them to the queue database, read its depth."""

    def reserve_job_id(self) -> int:
        """Draw one job id from this (queue) database's job id sequence, in autocommit.

        Returns:
            An id no job has and no other call gets.
        """

    def reserve_job_ids(self, n: int) -> list[int]:
        """Draw ``n`` job ids from this (queue) database's job id sequence, in autocommit.

        Args:
            n: how many (>= 1).

        Returns:
            ``n`` ascending ids no job has and no other call gets (one statement on PostgreSQL).
        """

    def put_outbox(self, target: str, job_id: int, job: NewJob) -> datetime:
        """Write ``job`` to this database's outbox, in the caller's transaction.

        Args:
            target: the alias of the queue's database.
            job_id: the id :meth:`reserve_job_id` drew on ``target``.
            job: the validated job; a ``delay_s`` becomes its run_at now (this clock).

        Returns:
            The row's ``created_at`` (this database's clock), aware.
        """

    def put_outbox_many(self, target: str, jobs: Sequence[tuple[int, NewJob]]) -> datetime:
        """Write ``jobs`` to this database's outbox in one statement, in the caller's transaction.

        Args:
            target: the alias of the queue's database.
            jobs: ``(job id, job)`` pairs, each id drawn by :meth:`reserve_job_ids` on
                ``target`` and distinct; a ``delay_s`` becomes the job's run_at now.

        Returns:
            The rows' ``created_at`` (this database's clock: one for the statement), aware.
        """

    def take_outbox(self, target: str, limit: int) -> list[OutboxRow]:
        """Lock and return up to ``limit`` outbox rows for ``target``, oldest first.

        Call inside a transaction (the relay's); rows another relay holds are skipped, so relays
        in many processes share the rows.
        """

    def delete_outbox(self, ids: Sequence[int]) -> int:
        """Delete the outbox rows ``ids`` (relayed); return how many were deleted."""

    def insert_relayed(self, rows: Sequence[OutboxRow]) -> int:
        """Insert the jobs of ``rows`` on this (queue) database, each under its ``job_id``.

        A job whose id exists already (relayed before), or whose (queue, dedupe key) a live job
        holds, is not inserted. All rows or none: one transaction, committed on return.

        Returns:
            How many jobs were inserted.
        """

    def outbox_gauges(
        self, targets: Sequence[str], cap: int = OUTBOX_COUNT_CAP
    ) -> list[OutboxGauge]:
        """Return, per alias of ``targets``, how many rows wait for it here and the oldest's age.

        Args:
            targets: queue database aliases.
            cap: most rows counted per target; the count reads ``cap`` past it.

        Returns:
            One gauge per target, in ``targets``' sorted order.
        """
