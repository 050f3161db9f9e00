"""Internal: jobs enqueued after other jobs, on PostgreSQL.

Also a job with an ordering key, enqueued behind its key's last job (``enqueue_in_order.sql``):
the same waiting, with that job as its parent, but taking no lock (issue 33); a follower whose
parent ended unseen before the enqueue committed is released by :meth:`release_stranded`.

The statements: ``mark_parents.sql``, ``enqueue_child.sql``, ``link_parents.sql``, in one
savepoint of the caller's transaction (or a transaction of their own). Settling the children when
a parent finishes or is retried is migration 0015_parents's row trigger, in the statement that
moved the parent. A mixin of :class:`~jobqueue.store.postgres.PostgresStore`; the contract is
:class:`~jobqueue.store.parents.ParentStore`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobqueue.store.base import NewJob
from jobqueue.store.parents import start
from jobqueue.store.rows import fetchall, fetchone


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


class PostgresParentStore:
    """enqueue_after, _enqueue_in_order, release_stranded; the host gives alias, _execute."""

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

        One statement (enqueue_in_order.sql), taking no lock: the job is linked to the key's last
        live or waiting job as to a parent and waits off the claim's path until that one ends. It
        never waits on another transaction, so it can neither deadlock nor wait on a caller's
        open transaction (issue 33).

        Args:
            params: enqueue.sql's parameters.

        Returns:
            ``(id, True, created_at)``: a job without a dedupe key is always new.
        """
        with self._execute("enqueue_in_order", params, callers=True) as cursor:
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
        with self._execute("release_stranded", {"limit": int(limit)}) as cursor:
            row = fetchone(cursor)
        return int(row.released)
