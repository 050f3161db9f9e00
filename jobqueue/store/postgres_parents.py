"""Internal: jobs enqueued after other jobs, on PostgreSQL.

Also a job with an ordering key, enqueued behind its key's last job (``ordering_lock.sql``,
``enqueue_in_order.sql``): the same waiting, with that job as its parent.

The statements: ``mark_parents.sql``, ``enqueue_child.sql``, ``link_parents.sql``, in one
savepoint of the caller's transaction (or a transaction of their own). Settling the children when
a parent finishes or is retried is migration 0015_parents's row trigger, in the statement that
moved the parent. A mixin of :class:`~jobqueue.store.postgres.PostgresStore`; the contract is
:class:`~jobqueue.store.interface.Store`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.store.interface import NewJob
from jobqueue.store.rows import fetchall, fetchone
from jobqueue.store.shared import start


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


class PostgresParentStore:
    """enqueue_after, _enqueue_in_order; the host gives ``alias`` and ``_execute``."""

    alias: str
    _execute: Any

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        with transaction.atomic(using=self.alias):
            with self._execute("mark_parents", {"ids": list(after)}, callers=True) as cursor:
                found = {r.id: (r.state, _json(r.result)) for r in fetchall(cursor)}
            begin = start(
                job,
                after,
                found,
                run_on_parent_failure=run_on_parent_failure,
                takes_parent_results=takes_parent_results,
                now=timezone.now(),
            )
            params = {
                "queue": job.queue,
                "type": job.type,
                "payload": begin.payload_json,
                "priority": job.priority,
                "tenant_id": job.tenant_id,
                "state": begin.state,
                "run_at": job.run_at,
                "delay_s": job.delay_s,
                "max_attempts": job.max_attempts,
                "timeout_s": job.timeout_s,
                "ordering_key": job.ordering_key,
                "concurrency_key": job.concurrency_key,
                "concurrency_limit": job.concurrency_limit,
                "errors": json.dumps(list(begin.errors)),
                "waiting_for": begin.waiting_for,
            }
            with self._execute("enqueue_child", params, callers=True) as cursor:
                row = fetchone(cursor)
            links = {
                "child": row.id,
                "parents": list(after),
                "counted": list(begin.counted),
                "run_on_parent_failure": run_on_parent_failure,
                "takes_parent_results": takes_parent_results,
            }
            self._execute("link_parents", links, callers=True).close()
        return row.id, row.created_at

    def _enqueue_in_order(self, params: dict[str, Any]) -> tuple[int, bool, datetime]:
        """Enqueue a job with an ordering key (no dedupe key) behind its key's last job.

        Two statements in one transaction (the caller's, or one of their own): the key's lock
        (ordering_lock.sql), then the insert, linked to the key's last live or waiting job as to a
        parent (enqueue_in_order.sql): the job waits off the claim's path until that one ends.

        Args:
            params: enqueue.sql's parameters.

        Returns:
            ``(id, True, created_at)``: a job without a dedupe key is always new.
        """
        # No savepoint: one more round trip each way, and an error in either statement aborts
        # the caller's transaction as the single-statement enqueue's error would.
        with transaction.atomic(using=self.alias, savepoint=False):
            self._execute("ordering_lock", params, callers=True).close()
            with self._execute("enqueue_in_order", params, callers=True) as cursor:
                row = fetchone(cursor)
        assert row is not None
        return row.id, True, row.created_at
