"""Internal: operator writes and reads on PostgreSQL: cancel, retry, run now, prune.

:class:`PostgresOperator` is the operator area of
:class:`~jobqueue.store.postgres.PostgresStore`: ``cancel.sql``, ``cancel_many.sql``,
``retry.sql``, ``retry_many.sql``, ``run_now.sql``, ``job_exists.sql``, ``count_prunable.sql``,
``prune.sql`` and ``prune_batches.sql``, and the worker rows
(:class:`~jobqueue.store.shared.WorkerRegistry`, plain ORM).

A prune deletes the parent links of the jobs it deletes (``prune.sql``) and then the batches left
done with no member (``prune_batches.sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import IntegrityError

from jobqueue.errors import DuplicateJob, JobNotFound
from jobqueue.models import Job
from jobqueue.states import LIVE
from jobqueue.store import bounded
from jobqueue.store.postgres.db import PostgresArea
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import WorkerRegistry


class PostgresOperator(WorkerRegistry, PostgresArea):
    """Operator writes and reads on PostgreSQL: cancel, retry, run now, prune."""

    def touch_worker(self, worker_id: str, running_jobs: int = 0, status: str = "running") -> None:
        # One round trip: every worker process sends it each heartbeat, idle or not (the ORM's
        # update in a transaction of its own was three).
        params = {"worker_id": worker_id, "running_jobs": running_jobs, "status": status}
        with self.db.execute("touch_worker", params):
            pass

    def wake_queues(self, queues: Sequence[str]) -> None:
        if queues:
            with self.db.execute("wake_queues", {"queues": sorted(set(queues))}) as cursor:
                cursor.fetchall()

    def _exists(self, job_id: int) -> bool:
        with self.db.execute("job_exists", {"id": job_id}) as cursor:
            return cursor.fetchone() is not None

    def cancel_or_request(self, job_id: int, by: str = "") -> str | None:
        with self.db.execute("cancel", {"id": job_id, "by": by}) as cursor:
            row = fetchone(cursor)
        if row is not None:
            return row.state
        if not self._exists(job_id):
            raise JobNotFound(job_id)
        return None

    def cancel_many(self, job_ids: Sequence[int], by: str = "") -> dict[int, str]:
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        with self.db.execute("cancel_many", {"ids": ids, "by": by}) as cursor:
            return {row.id: row.state for row in fetchall(cursor)}

    def retry(self, job_id: int, by: str = "") -> bool:
        try:
            # A savepoint, so a refused retry leaves the caller's transaction usable.
            with bounded.own_transaction(self.alias):
                with self.db.execute("retry", {"id": job_id, "by": by}) as cursor:
                    if cursor.fetchone() is not None:
                        return True
        except IntegrityError:
            job = Job.objects.using(self.alias).get(id=job_id)
            holder = (
                Job.objects.using(self.alias)
                .filter(queue=job.queue, dedupe_key=job.dedupe_key, state__in=LIVE)
                .values_list("id", flat=True)
                .first()
            )
            raise DuplicateJob(job.queue, job.dedupe_key or "", holder) from None
        if not self._exists(job_id):
            raise JobNotFound(job_id)
        return False

    def retry_many(self, job_ids: Sequence[int], by: str = "") -> set[int]:
        ids = sorted(set(job_ids))
        if not ids:
            return set()
        try:
            # A savepoint: a dedupe key taken by a concurrent enqueue between the check and the
            # update aborts only this statement; then each row goes through retry() on its own.
            with bounded.own_transaction(self.alias):
                with self.db.execute("retry_many", {"ids": ids, "by": by}) as cursor:
                    return {row.id for row in fetchall(cursor)}
        except IntegrityError:
            retried: set[int] = set()
            for job_id in ids:
                try:
                    if self.retry(job_id, by):
                        retried.add(job_id)
                except (DuplicateJob, JobNotFound):
                    continue
            return retried

    def run_now(self, job_id: int, by: str = "") -> bool:
        with self.db.execute("run_now", {"id": job_id, "by": by}) as cursor:
            if cursor.fetchone() is not None:
                return True
        if not self._exists(job_id):
            raise JobNotFound(job_id)
        return False

    def prune(
        self,
        states: Sequence[str],
        older_than_s: float,
        limit: int,
        now: datetime | None = None,
    ) -> int:
        params = {
            "states": list(states),
            "older_than_s": older_than_s,
            "limit": limit,
            "now": now,
        }
        with bounded.own_transaction(self.alias):
            with self.db.execute("prune", params) as cursor:
                row = fetchone(cursor)
            bounded.checkpoint("pruner", self.alias)
        if row.batches:
            # After the commit above, in a statement of its own: see prune_batches.sql.
            with self.db.execute("prune_batches", {"ids": list(row.batches)}):
                pass
        return row.jobs

    def count_prunable(
        self, states: Sequence[str], older_than_s: float, now: datetime | None = None
    ) -> int:
        params = {
            "states": list(states),
            "older_than_s": [float(older_than_s)] * len(states),
            "cap": None,
            "now": now,
        }
        with self.db.execute("count_prunable", params) as cursor:
            return sum(row.prunable for row in fetchall(cursor))
