"""Internal: jobs after parents, batches, progress and checkpoints on PostgreSQL.

:class:`PostgresFlows` is the flows area of :class:`~jobqueue.store.postgres.PostgresStore`.

Jobs after other jobs: ``mark_parents.sql``, ``enqueue_child.sql`` and ``link_parents.sql``, in
one savepoint of the caller's transaction (or a transaction of their own). Settling the children
when a parent finishes or is retried is migration 0015_parents's row trigger, in the statement
that moved the parent.

A job with an ordering key is enqueued behind its key's last job (``enqueue_in_order.sql``): the
same waiting, with that job as its parent, but taking no lock (issue 33). A follower whose parent
ended unseen before the enqueue committed is released by :meth:`~PostgresFlows.release_stranded`
(``release_stranded.sql``).

Batches: ``add_batch_members.sql``, one per ``enqueue_many`` of a batch, however many members.
The batch row itself and an empty batch's end are once per batch: the ORM writes them
(:class:`~jobqueue.store.shared.BatchRows`).

Progress, checkpoints and waiters: ``record_progress.sql``, ``save_checkpoint.sql``,
``watch.sql``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.errors import JobNotFound, LeaseLost
from jobqueue.models import Job
from jobqueue.store.interface import NewJob
from jobqueue.store.postgres.db import PostgresArea, enqueue_params
from jobqueue.store.rows import fetchall, fetchone, json_value
from jobqueue.store.shared import BatchRows, start


class PostgresFlows(BatchRows, PostgresArea):
    """Jobs after parents, batches, progress and checkpoints on PostgreSQL."""

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        with transaction.atomic(using=self.alias):
            with self.db.execute("mark_parents", {"ids": list(after)}, callers=True) as cursor:
                found = {r.id: (r.state, json_value(r.result)) for r in fetchall(cursor)}
            begin = start(
                job,
                after,
                found,
                run_on_parent_failure=run_on_parent_failure,
                takes_parent_results=takes_parent_results,
                now=timezone.now(),
            )
            params = {
                **enqueue_params(job),
                "payload": begin.payload_json,
                "state": begin.state,
                "errors": json.dumps(list(begin.errors)),
                "waiting_for": begin.waiting_for,
            }
            with self.db.execute("enqueue_child", params, callers=True) as cursor:
                row = fetchone(cursor)
            links = {
                "child": row.id,
                "parents": list(after),
                "counted": list(begin.counted),
                "run_on_parent_failure": run_on_parent_failure,
                "takes_parent_results": takes_parent_results,
            }
            self.db.execute("link_parents", links, callers=True).close()
        return row.id, row.created_at

    def enqueue_in_order(self, params: dict[str, Any]) -> tuple[int, bool, datetime]:
        """Enqueue a job with an ordering key (no dedupe key) behind its key's last job.

        One statement (enqueue_in_order.sql), taking no lock: the job is linked to the key's last
        live or waiting job as to a parent and waits off the claim's path until that one ends. It
        never waits on another transaction, so it can neither deadlock nor wait on a caller's
        open transaction (issue 33).

        Args:
            params: enqueue.sql's parameters.

        Returns:
            ``(id, True, created_at)``: a job without a dedupe key is always new.
        """
        with self.db.execute("enqueue_in_order", params, callers=True) as cursor:
            row = fetchone(cursor)
        assert row is not None
        return row.id, True, row.created_at

    def release_stranded(self, limit: int = 500) -> int:
        """Release ordering-key followers whose parent ended before their enqueue committed.

        Internal (the reaper's tick). Such a follower's parent's trigger could not see the
        uncommitted link (``release_stranded.sql`` says why it happens and which it finds).

        Args:
            limit: most jobs released in one call.

        Returns:
            How many jobs were released (ready or scheduled).
        """
        with self.db.execute("release_stranded", {"limit": int(limit)}) as cursor:
            row = fetchone(cursor)
        return int(row.released)

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        if not job_ids:
            return 0
        params = {"batch_id": batch_id, "ids": list(job_ids)}
        with self.db.execute("add_batch_members", params, callers=True) as cursor:
            row = fetchone(cursor)
        return 0 if row is None else int(row.n)

    def record_progress(
        self, job_id: int, lease_token: uuid.UUID, done: int, total: int | None
    ) -> None:
        params = {"id": job_id, "lease_token": lease_token, "done": done, "total": total}
        with self.db.execute("record_progress", params) as cursor:
            if fetchone(cursor) is None:
                raise LeaseLost(job_id)

    def save_checkpoint(self, job_id: int, lease_token: uuid.UUID, state_json: str) -> None:
        params = {"id": job_id, "lease_token": lease_token, "state": state_json}
        with self.db.execute("save_checkpoint", params) as cursor:
            if fetchone(cursor) is None:
                raise LeaseLost(job_id)

    def read_checkpoint(self, job_id: int) -> Any:
        rows = list(Job.objects.using(self.alias).filter(id=job_id).values_list("checkpoint"))
        if not rows:
            raise JobNotFound(job_id)
        return rows[0][0]

    def watch(self, job_id: int) -> str | None:
        with self.db.execute("watch", {"id": job_id}) as cursor:
            row = fetchone(cursor)
        return None if row is None else row.state
