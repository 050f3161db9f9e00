"""Internal: the transactional outbox on PostgreSQL.

:class:`PostgresOutbox` is the outbox area of :class:`~jobqueue.store.postgres.PostgresStore`.

``outbox_put.sql`` and ``outbox_put_many.sql`` run in the caller's transaction (``callers``: never
bounded by jobqueue's limits); each wakes the relays listening on this database at its commit
(``pg_notify('jobqueue_outbox', <target>)``). A job's id is drawn from the queue database's
sequence at enqueue (``reserve_ids.sql``). The relay's statements (``outbox_take.sql``,
``relay_jobs.sql``, ``outbox_delete.sql``) run in its own bounded transactions
(``jobqueue.maintenance.relay``); ``outbox_gauges.sql`` reads the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobqueue.store.interface import OUTBOX_COUNT_CAP, NewJob, OutboxGauge, OutboxRow
from jobqueue.store.postgres.db import PostgresArea
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import job_json


class PostgresOutbox(PostgresArea):
    """The transactional outbox on PostgreSQL."""

    def reserve_job_id(self) -> int:
        params = {"n": 1}
        with self.db.execute("reserve_ids", params) as cursor:
            return int(fetchone(cursor).id)

    def reserve_job_ids(self, n: int) -> list[int]:
        with self.db.execute("reserve_ids", {"n": int(n)}) as cursor:
            return [int(row.id) for row in fetchall(cursor)]

    def put_outbox(self, target: str, job_id: int, job: NewJob) -> datetime:
        params = {
            "target": target,
            "job_id": job_id,
            "job": job_json(job, job_id),
            "delay_s": float(job.delay_s),
        }
        with self.db.execute("outbox_put", params, callers=True) as cursor:
            created_at: datetime = fetchone(cursor).created_at
        return created_at

    def put_outbox_many(self, target: str, jobs: Sequence[tuple[int, NewJob]]) -> datetime:
        params = {
            "target": target,
            "jobs": [job_json(job, job_id) for job_id, job in jobs],
            "delays": [float(job.delay_s) for _, job in jobs],
        }
        with self.db.execute("outbox_put_many", params, callers=True) as cursor:
            created_at: datetime = fetchone(cursor).created_at
        return created_at

    def take_outbox(self, target: str, limit: int) -> list[OutboxRow]:
        params = {"target": target, "limit": int(limit)}
        with self.db.execute("outbox_take", params) as cursor:
            rows = fetchall(cursor)
        return [
            OutboxRow(id=r.id, job_id=r.job_id, job=r.job, created_at=r.created_at) for r in rows
        ]

    def delete_outbox(self, ids: Sequence[int]) -> int:
        with self.db.execute("outbox_delete", {"ids": list(ids)}) as cursor:
            return int(cursor.rowcount)

    def insert_relayed(self, rows: Sequence[OutboxRow]) -> int:
        if not rows:
            return 0
        params = {"jobs": "[{}]".format(",".join(r.job for r in rows))}
        # In autocommit (the relay never opens a transaction on the queue database): one
        # statement, committed before the relay deletes the rows.
        with self.db.execute("relay_jobs", params) as cursor:
            return len(fetchall(cursor))

    def outbox_gauges(
        self, targets: Sequence[str], cap: int = OUTBOX_COUNT_CAP
    ) -> list[OutboxGauge]:
        params = {"targets": sorted(targets), "cap": int(cap)}
        with self.db.execute("outbox_gauges", params) as cursor:
            rows = fetchall(cursor)
        return [
            OutboxGauge(target=r.target, waiting=r.waiting, oldest_age_s=r.oldest_age_s)
            for r in rows
        ]
