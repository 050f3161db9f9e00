"""Internal: progress, checkpoints and waiters on PostgreSQL.

The statements: ``record_progress.sql``, ``save_checkpoint.sql``, ``watch.sql``.

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`; the contract is
:class:`~jobqueue.store.interface.Store`.
"""

from __future__ import annotations

import uuid
from typing import Any

from jobqueue.errors import JobNotFound, LeaseLost
from jobqueue.models import Job
from jobqueue.store.rows import fetchone


class PostgresProgressStore:
    """record_progress, save_checkpoint, read_checkpoint, watch; the host gives ``_execute``."""

    alias: str
    _execute: Any

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        params = {"id": job_id, "lease_token": lease_token, "done": done, "total": total}
        with self._execute("record_progress", params) as cursor:
            if fetchone(cursor) is None:
                raise LeaseLost(job_id)

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        params = {"id": job_id, "lease_token": lease_token, "state": state_json}
        with self._execute("save_checkpoint", params) as cursor:
            if fetchone(cursor) is None:
                raise LeaseLost(job_id)

    def read_checkpoint(self, job_id: int) -> Any:
        rows = list(Job.objects.using(self.alias).filter(id=job_id).values_list("checkpoint"))
        if not rows:
            raise JobNotFound(job_id)
        return rows[0][0]

    def watch(self, job_id: int) -> str | None:
        with self._execute("watch", {"id": job_id}) as cursor:
            row = fetchone(cursor)
        return None if row is None else row.state
