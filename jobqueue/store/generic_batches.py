"""Internal: batches on the ORM.

A mixin of :class:`~jobqueue.store.generic.GenericStore` (and the base of the PostgreSQL one,
which replaces the member update with one statement); the contract is
:class:`~jobqueue.store.interface.Store`. Every write runs in the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db.models import F
from django.utils import timezone

from jobqueue.models import Batch, Job

#: Ids per UPDATE: SQLite's bound-parameter limit is 999 on old builds.
MEMBER_CHUNK = 900


class GenericBatchStore:
    """create_batch, add_batch_members, close_empty_batch; the host gives ``alias``."""

    alias: str

    def create_batch(self, payload_json: str, callbacks_json: str) -> int:
        batch = Batch.objects.using(self.alias).create(
            payload=json.loads(payload_json), callbacks=json.loads(callbacks_json)
        )
        return batch.id

    def add_batch_members(self, batch_id: int, job_ids: Sequence[int]) -> int:
        ids = list(job_ids)
        joined = 0
        for start in range(0, len(ids), MEMBER_CHUNK):
            joined += (
                Job.objects.using(self.alias)
                .filter(id__in=ids[start : start + MEMBER_CHUNK], batch_id__isnull=True)
                .update(batch_id=batch_id)
            )
        if joined:
            Batch.objects.using(self.alias).filter(id=batch_id).update(
                total=F("total") + joined, pending=F("pending") + joined
            )
        return joined

    def close_empty_batch(
        self, batch_id: int, success_job_id: int | None, complete_job_id: int | None
    ) -> None:
        Batch.objects.using(self.alias).filter(id=batch_id, total=0).update(
            completions=F("completions") + 1,
            completed_at=timezone.now(),
            success_job_id=success_job_id,
            complete_job_id=complete_job_id,
        )
