"""Internal: batches on PostgreSQL.

The statement: ``add_batch_members.sql`` (one per ``enqueue_many`` of a batch, however many
members). The batch row itself and an empty batch's end are once per batch: the ORM writes them,
as :class:`~jobqueue.store.generic_batches.GenericBatchStore` does.

A mixin of :class:`~jobqueue.store.postgres.PostgresStore`; the contract is
:class:`~jobqueue.store.interface.Store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobqueue.store.generic_batches import GenericBatchStore
from jobqueue.store.rows import fetchone


class PostgresBatchStore(GenericBatchStore):
    """create_batch, add_batch_members, close_empty_batch; the host gives ``_execute``."""

    alias: str
    _execute: Any

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        if not job_ids:
            return 0
        params = {"batch_id": batch_id, "ids": list(job_ids)}
        with self._execute("add_batch_members", params, callers=True) as cursor:
            row = fetchone(cursor)
        return 0 if row is None else int(row.n)
